"""What a target is (service × agent × version), and the target cap: which targets get their
own metric labels.

Every per-target metric (decision gauges, run counters and histograms) asks one shared cap, so a
target has its own labels everywhere or nowhere and `sextant_decision_state` joins the run metrics
on the same labels. At most `max_targets` targets hold a place, taken in the order they first
appear; the rest share the `_overflow` labels, so a flood of versions cannot blow up Prometheus.
A target that has not run for `idle_seconds` gives its place up when a new target needs one, and
the series kept under its labels are removed (its counters would otherwise never go away).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import NamedTuple

from collector.clock import Clock

ANY = "*"  # a scope's field: every service, agent or version


class Target(NamedTuple):
    """What is judged: a service.name × agent name × service.version, the same in every stage.

    A tuple, so its values are the metric labels as they are (`labels(*target)`) and the
    `service_name, agent_name, service_version` columns in that order. A part the runs did not
    report is None where it is read from the store (drift compares a missing service.version
    like any other value); a decision's target names it "" instead, and `*` in a decision's
    scope stands for every value.
    """

    service: str | None
    agent: str | None
    version: str | None

    def label(self) -> str:
        if not any(self):
            return "(collector)"  # no service, agent or version to name: Sextant's own health
        return f"{self.service}/{self.agent}@{self.version}"

    def covers(self, other: Target) -> bool:
        """A decision for this target also holds for `other`: the same target, or a scope
        (`*` fields) that takes it in, e.g. every target of one service."""
        return all(mine in (ANY, theirs) for mine, theirs in zip(self, other, strict=True))

    def is_scope(self) -> bool:
        return ANY in self


def describe_target(target: Target) -> str:
    """`service / agent / version`, `-` for a part the runs did not report."""
    return " / ".join(part if part is not None else "-" for part in target)


def label_values(target: Target) -> tuple[str, str, str]:
    """The values as metric and alert labels: "" for a part the runs did not report."""
    service, agent, version = target
    return (service or "", agent or "", version or "")


OVERFLOW = Target("_overflow", "_overflow", "_overflow")
TARGET_LABELS = ["service", "agent", "version"]


class TargetCap:
    def __init__(self, max_targets: int, idle_seconds: float, clock: Clock) -> None:
        self.max_targets = max_targets
        self.idle = timedelta(seconds=idle_seconds)
        self.clock = clock
        self._active: dict[Target, datetime] = {}  # target with a place -> when it last ran
        self._released: list[Callable[[Target], None]] = []
        # No place is free before this (a lower bound: places only grow more recent), so a flood
        # of targets over a full cap does not scan every place for each of them.
        self._no_idle_before: datetime | None = None
        self._lock = threading.Lock()  # the assembler records runs while Prometheus scrapes

    def on_release(self, callback: Callable[[Target], None]) -> None:
        """`callback(target)` runs when a target gives its place up: drop its series."""
        self._released.append(callback)

    def shown(self, target: Target, active_at: datetime | None = None) -> Target:
        """The labels `target` is shown under: its own, or `_overflow` when the cap is full.
        `active_at` is when it last ran (now, when a run is being counted)."""
        at = active_at if active_at is not None else self.clock.now()
        with self._lock:
            if target in self._active:
                self._active[target] = max(self._active[target], at)
                return target
            if len(self._active) >= self.max_targets:
                for old in self._release_idle():
                    for callback in self._released:
                        callback(old)
            if len(self._active) >= self.max_targets:
                return OVERFLOW
            self._active[target] = at
            if self._no_idle_before is not None:
                self._no_idle_before = min(self._no_idle_before, at)
            return target

    def _release_idle(self) -> list[Target]:
        cutoff = self.clock.now() - self.idle
        if self._no_idle_before is not None and cutoff <= self._no_idle_before:
            return []
        idle = [t for t, at in self._active.items() if at < cutoff]
        for target in idle:
            del self._active[target]
        self._no_idle_before = min(self._active.values(), default=None)
        return idle

    def __len__(self) -> int:
        with self._lock:
            return len(self._active)
