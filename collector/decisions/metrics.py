"""Decision gauges computed at scrape time from the engine's state.

`sextant_decision_state{service,agent,version,decision}` is 1 while that decision fires for the
target and 0 otherwise; every target seen recently has a series for each decision it has had,
and PASS is 1 for a target with nothing firing and full coverage. Targets beyond the cap share
the `_overflow` labels so a flood of versions cannot blow up Prometheus.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from collector.decisions.engine import Snapshot
from collector.decisions.state import EVERY_TARGET, State, Target
from evaluators.base import DECISION_PRECEDENCE, DECISION_STRENGTH, Decision, strongest

OVERFLOW = Target("_overflow", "_overflow", "_overflow")
LABELS = ["service", "agent", "version", "decision"]
# As a gauge, a stronger decision is a larger number: 0 PASS ... 6 DISABLE.
GAUGE_STRENGTH = {d: len(DECISION_PRECEDENCE) - 1 - DECISION_STRENGTH[d] for d in Decision}
STRENGTH_HELP = ", ".join(
    f"{n} {d.value}" for d, n in sorted(GAUGE_STRENGTH.items(), key=lambda x: x[1])
)


class DecisionCollector(Collector):
    def __init__(self, snapshot: Callable[[], Snapshot], max_targets: int) -> None:
        self.snapshot = snapshot
        self.max_targets = max_targets
        self._seen: dict[Target, set[Decision]] = {}
        self._lock = threading.Lock()  # scrapes may run at the same time

    def collect(self) -> Iterator[GaugeMetricFamily]:
        with self._lock:
            families = self._families()
        yield from families

    def _families(self) -> list[GaugeMetricFamily]:
        snap = self.snapshot()
        firing: dict[Target, set[Decision]] = {}
        pending: dict[Target, set[Decision]] = {}
        for s in snap.states:
            into = firing if s.state == State.FIRING else pending
            into.setdefault(s.key.target, set()).add(s.key.decision)
        # Scopes (every target, one service's targets) fire for each target they take in.
        scopes = {t: d for t, d in firing.items() if t.is_scope()}
        # The most recently active targets keep their own labels.
        ranked = sorted(snap.targets, key=lambda t: snap.targets[t], reverse=True)
        known = set(ranked[: self.max_targets]) | set(scopes) | {EVERY_TARGET}
        state = GaugeMetricFamily(
            "sextant_decision_state",
            "1 while the decision fires for the target (service x agent x version), else 0;"
            " PASS is 1 when nothing fires and coverage is complete.",
            labels=LABELS,
        )
        waiting = GaugeMetricFamily(
            "sextant_decision_pending",
            "1 while the decision's condition holds but it waits for its `for` duration.",
            labels=LABELS,
        )
        effective = GaugeMetricFamily(
            "sextant_target_decision_strength",
            f"The strongest firing decision of the target as a number: {STRENGTH_HELP}.",
            labels=["service", "agent", "version", "decision"],
        )
        values: dict[tuple[Target, Decision], float] = {}
        for target in set(snap.targets) | set(firing) | set(pending):
            shown = target if target in known else OVERFLOW
            active = firing.get(target, set()).union(
                *(d for scope, d in scopes.items() if scope != target and scope.covers(target))
            )
            seen = self._seen.setdefault(shown, set())
            seen.update(active | pending.get(target, set()) | {Decision.PASS})
            for decision in seen:
                on = 1.0 if decision in active else 0.0
                if decision == Decision.PASS:
                    on = 0.0 if active else 1.0
                values[shown, decision] = max(values.get((shown, decision), 0.0), on)
            for decision in pending.get(target, set()):
                waiting.add_metric([*labels(shown), decision.value], 1.0)
        for (target, decision), value in sorted(values.items(), key=str):
            state.add_metric([*labels(target), decision.value], value)
        targets = {t for t, _ in values}
        for target in targets:
            lit = [d for (t, d), v in values.items() if t == target and v and d != "PASS"]
            top = strongest(lit)
            effective.add_metric([*labels(target), top.value], float(GAUGE_STRENGTH[top]))
        self._seen = {t: d for t, d in self._seen.items() if t in targets}
        return [state, waiting, effective]


def labels(target: Target) -> list[str]:
    return [target.service, target.agent, target.version]
