"""Evaluator health: per pack and rule, what ran, what it concluded, and what went wrong."""

from __future__ import annotations

import threading
from dataclasses import asdict, dataclass
from typing import Any

from collector.clock import Clock, SystemClock
from collector.evaluation.packs import iso_utc
from collector.evaluation.round import Tally

VERDICT_FIELDS = {
    "pass": "passed",
    "fail": "failed",
    "review": "reviewed",
    "not_applicable": "not_applicable",
}


@dataclass
class RuleHealth:
    pack: str
    rule: str
    evaluated: int = 0
    passed: int = 0
    failed: int = 0
    reviewed: int = 0
    not_applicable: int = 0
    errored: int = 0
    last_error: str | None = None
    last_error_at: str | None = None
    last_evaluated_at: str | None = None


class EvaluatorHealth:
    """Answers "did my evaluator run, and did it work?" for every rule in force. The counts
    live in this process: they start at 0 at `since` and restart at 0 with it."""

    def __init__(self, clock: Clock | None = None) -> None:
        self.clock = clock or SystemClock()
        self.since = iso_utc(self.clock.now())
        self._rules: dict[tuple[str, str], RuleHealth] = {}
        self._matched: dict[str, int] = {}
        self._lock = threading.Lock()

    def record(self, tally: Tally) -> None:
        now = iso_utc(self.clock.now())
        with self._lock:
            for pack, count in tally.applied.items():
                self._matched[pack] = self._matched.get(pack, 0) + count
            for (pack, rule, verdict, reason), count in tally.outcomes.items():
                health = self._rules.setdefault((pack, rule), RuleHealth(pack, rule))
                health.evaluated += count
                field = VERDICT_FIELDS[verdict]
                setattr(health, field, getattr(health, field) + count)
                health.last_evaluated_at = now
                if reason == "evaluator_error":
                    health.errored += count
            for (pack, rule), message in tally.errors.items():
                health = self._rules[(pack, rule)]
                health.last_error, health.last_error_at = message, now

    def snapshot(self, packs: list[dict[str, Any]], disabled: list[str]) -> list[dict[str, Any]]:
        """One row per rule of the packs in force (and the disabled ones)."""
        out = []
        with self._lock:
            for pack in packs:
                name = pack["pack"]
                for rule in pack["rules"]:
                    health = self._rules.get((name, rule), RuleHealth(name, rule))
                    row = asdict(health)
                    row["matched_trajectories"] = self._matched.get(name, 0)
                    off = name in disabled or f"{name}/{rule}" in disabled
                    row["status"] = (
                        "disabled"
                        if off
                        else "erroring"
                        if health.errored
                        and health.last_error_at
                        and health.last_error_at >= (health.last_evaluated_at or "")
                        else "active"
                    )
                    row["pack_version"] = pack["version"]
                    out.append(row)
        return out
