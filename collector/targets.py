"""The target cap: which targets (service × agent × version) get their own metric labels.

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

from collector.clock import Clock

Labels = tuple[str, str, str]  # service, agent, version
OVERFLOW: Labels = ("_overflow", "_overflow", "_overflow")
TARGET_LABELS = ["service", "agent", "version"]


class TargetCap:
    def __init__(self, max_targets: int, idle_seconds: float, clock: Clock) -> None:
        self.max_targets = max_targets
        self.idle = timedelta(seconds=idle_seconds)
        self.clock = clock
        self._active: dict[Labels, datetime] = {}  # target with a place -> when it last ran
        self._released: list[Callable[[Labels], None]] = []
        # No place is free before this (a lower bound: places only grow more recent), so a flood
        # of targets over a full cap does not scan every place for each of them.
        self._no_idle_before: datetime | None = None
        self._lock = threading.Lock()  # the assembler records runs while Prometheus scrapes

    def on_release(self, callback: Callable[[Labels], None]) -> None:
        """`callback(target)` runs when a target gives its place up: drop its series."""
        self._released.append(callback)

    def shown(self, target: Labels, active_at: datetime | None = None) -> Labels:
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

    def _release_idle(self) -> list[Labels]:
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
