"""The session stage's self-metrics."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge


class SessionMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.open = Gauge(
            "sextant_sessions_open",
            "Sessions with a turn within sessions.idle_seconds.",
            registry=registry,
        )
        self.events = Counter(
            "sextant_sessions",
            "Session events: opened (first turn), reopened (a turn after it closed), closed.",
            ["event"],
            registry=registry,
        )
        self.turns = Counter(
            "sextant_session_turns", "Runs grouped into a session.", registry=registry
        )
        self.lag = Gauge(
            "sextant_sessions_lag_seconds",
            "How long the oldest closed run waiting for the session stage has waited (reading"
            " back a backlog: how far behind the newest closed run it is; 0 when caught up).",
            registry=registry,
        )
        self.dropped = Counter(
            "sextant_sessions_queue_dropped_runs",
            "Closed runs that did not fit the session stage's queue (sessions.max_queue); they"
            " are read again from the store.",
            registry=registry,
        )
