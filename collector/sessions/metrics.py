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
            "How far the session stage is behind the newest closed run (0 when caught up).",
            registry=registry,
        )
