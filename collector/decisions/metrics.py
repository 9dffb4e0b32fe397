"""The decision stage's self-metrics (DecisionMetrics: rounds, wake-ups, transitions), and the
decision gauges computed at scrape time from the engine's state.

`sextant_decision_state{service,agent,version,decision}` is 1 while that decision fires for the
target and 0 otherwise; every target seen recently has a series for each decision it has had,
and PASS is 1 for a target with nothing firing and full coverage. `sextant_decision_info` says
why (reason codes) and whose (owner) for each firing decision. Which targets keep their own labels
is the shared target cap's call (`collector.targets`): the rest share `_overflow`.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry, Counter, Gauge
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from collector.decisions.state import EVERY_TARGET, DecisionState, State
from collector.targets import TARGET_LABELS, Target, TargetCap, label_values
from evaluators.base import DECISION_PRECEDENCE, DECISION_STRENGTH, Decision, strongest

if TYPE_CHECKING:  # the engine takes DecisionMetrics from here
    from collector.decisions.engine import Snapshot

LABELS = [*TARGET_LABELS, "decision"]
# As a gauge, a stronger decision is a larger number: 0 PASS ... 6 DISABLE.
GAUGE_STRENGTH = {d: len(DECISION_PRECEDENCE) - 1 - DECISION_STRENGTH[d] for d in Decision}
STRENGTH_HELP = ", ".join(
    f"{n} {d.value}" for d, n in sorted(GAUGE_STRENGTH.items(), key=lambda x: x[1])
)


@dataclass
class Why:
    """Reason codes and owners of what makes one decision fire for one shown target, and the
    decision the dashboard links to: the one that fired first, so the link stays put while it
    fires (the others are on the console's decision list beside it)."""

    reasons: set[str] = field(default_factory=set)
    owners: set[str] = field(default_factory=set)
    first: tuple[str, str] | None = None  # (fired_at, id) of the earliest firing

    def add(self, state: DecisionState) -> None:
        self.reasons.update(state.finding.reasons)
        if state.finding.owner:
            self.owners.add(state.finding.owner)
        fired = (state.fired_at.isoformat() if state.fired_at else "", state.id)
        if self.first is None or fired < self.first:
            self.first = fired

    @property
    def decision_id(self) -> str:
        return self.first[1] if self.first else ""


class DecisionCollector(Collector):
    def __init__(self, snapshot: Callable[[], Snapshot], cap: TargetCap) -> None:
        self.snapshot = snapshot
        self.cap = cap
        self._seen: dict[Target, set[Decision]] = {}
        self._lock = threading.Lock()  # scrapes may run at the same time

    def collect(self) -> Iterator[GaugeMetricFamily]:
        with self._lock:
            families = self._families()
        yield from families

    def _shown(self, snap: Snapshot, scopes: set[Target]) -> dict[Target, Target]:
        """Each target's labels. Scopes (every target, one service's targets) always keep theirs;
        the most recently active targets ask the cap first, so a restart keeps them labelled."""
        shown = {t: t for t in scopes | {EVERY_TARGET}}
        for target in sorted(snap.targets, key=lambda t: snap.targets[t], reverse=True):
            if target not in shown:
                shown[target] = self.cap.shown(target, snap.targets[target])
        for s in snap.states:
            if s.key.target not in shown:
                shown[s.key.target] = self.cap.shown(s.key.target)
        return shown

    def _families(self) -> list[GaugeMetricFamily]:
        snap = self.snapshot()
        firing: dict[Target, list[DecisionState]] = {}
        pending: dict[Target, set[Decision]] = {}
        for s in snap.states:
            if s.state == State.FIRING:
                firing.setdefault(s.key.target, []).append(s)
            else:
                pending.setdefault(s.key.target, set()).add(s.key.decision)
        scopes = {t for t in firing if t.is_scope()}
        shown = self._shown(snap, scopes)
        values: dict[tuple[Target, Decision], float] = {}
        why: dict[tuple[Target, Decision], Why] = {}
        waiting: set[tuple[Target, Decision]] = set()
        for target in set(snap.targets) | set(firing) | set(pending):
            # A scope fires for each target it takes in.
            states = [s for t, ss in firing.items() if t.covers(target) for s in ss]
            active = {s.key.decision for s in states}
            seen = self._seen.setdefault(shown[target], set())
            seen.update(active | pending.get(target, set()) | {Decision.PASS})
            for decision in seen:
                on = 1.0 if decision in active else 0.0
                if decision == Decision.PASS:
                    on = 0.0 if active else 1.0
                key = (shown[target], decision)
                values[key] = max(values.get(key, 0.0), on)
            for s in states:
                why.setdefault((shown[target], s.key.decision), Why()).add(s)
            waiting.update((shown[target], d) for d in pending.get(target, set()))
        kept = {t for t, _ in values}
        self._seen = {t: d for t, d in self._seen.items() if t in kept}
        return [
            state_family(values),
            pending_family(waiting),
            info_family(why),
            strength_family(values),
        ]


def state_family(values: dict[tuple[Target, Decision], float]) -> GaugeMetricFamily:
    family = GaugeMetricFamily(
        "sextant_decision_state",
        "1 while the decision fires for the target (service x agent x version), else 0;"
        " PASS is 1 when nothing fires and coverage is complete.",
        labels=LABELS,
    )
    for (target, decision), value in sorted(values.items(), key=str):
        family.add_metric([*label_values(target), decision.value], value)
    return family


def pending_family(waiting: set[tuple[Target, Decision]]) -> GaugeMetricFamily:
    family = GaugeMetricFamily(
        "sextant_decision_pending",
        "1 while the decision's condition holds but it waits for its `for` duration.",
        labels=LABELS,
    )
    for target, decision in sorted(waiting, key=str):
        family.add_metric([*label_values(target), decision.value], 1.0)
    return family


def info_family(why: dict[tuple[Target, Decision], Why]) -> GaugeMetricFamily:
    """Reasons and owners are sorted and joined, so the series changes only when a reason or an
    owner is added, never from one scrape to the next."""
    family = GaugeMetricFamily(
        "sextant_decision_info",
        "1 for each firing decision of a target, with its reason codes and owner (comma-joined)"
        " and the id of the one that fired first (its console page: /decisions/{id}).",
        labels=[*LABELS, "reasons", "owner", "decision_id"],
    )
    for (target, decision), w in sorted(why.items(), key=str):
        reasons, owners = ",".join(sorted(w.reasons)), ",".join(sorted(w.owners))
        family.add_metric(
            [*label_values(target), decision.value, reasons, owners, w.decision_id], 1.0
        )
    return family


def strength_family(values: dict[tuple[Target, Decision], float]) -> GaugeMetricFamily:
    family = GaugeMetricFamily(
        "sextant_target_decision_strength",
        f"The strongest firing decision of the target as a number: {STRENGTH_HELP}.",
        labels=TARGET_LABELS,
    )
    for target in sorted({t for t, _ in values}):
        lit: list[Decision] = [
            d for (t, d), v in values.items() if t == target and v and d != Decision.PASS
        ]
        family.add_metric(list(label_values(target)), float(GAUGE_STRENGTH[strongest(lit)]))
    return family


class DecisionMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.evaluations = Counter(
            "sextant_decision_evaluations", "Decision evaluation rounds run.", registry=registry
        )
        self.wakeups = Counter(
            "sextant_decision_wakeups",
            "Commits of failing or review results that woke the decision round early.",
            registry=registry,
        )
        self.last_round = Gauge(
            "sextant_decision_last_round_timestamp_seconds",
            "When the last decision round completed (Unix time; the start time before the first).",
            registry=registry,
        )
        self.interval = Gauge(
            "sextant_decision_interval_seconds",
            "The configured decision round interval (decisions.interval_seconds).",
            registry=registry,
        )
        self.transitions = Counter(
            "sextant_decision_transitions",
            "Decision transitions recorded, by decision and event (firing, resolved, ack...).",
            ["decision", "event"],
            registry=registry,
        )
