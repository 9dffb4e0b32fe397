"""A window rule's conclusion about one target and metric."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from collector.drift.sides import Target
from evaluators.base import Verdict


@dataclass(frozen=True)
class WindowOutcome:
    target: Target
    metric: str
    verdict: Verdict
    reason: str | None
    message: str
    window_start: datetime
    window_end: datetime
    baseline: str | None = None
    effect_size: float | None = None
    p_value: float | None = None
    baseline_n: int | None = None
    current_n: int | None = None
    score: float | None = None
    evidence: tuple[str, ...] = field(default=())
