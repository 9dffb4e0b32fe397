"""A window rule's conclusion about one target and metric."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import duckdb

from collector.store.reader import Reader
from collector.targets import Target, describe_target
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
    # What it was decided on (each side's values, raw and adjusted p, the tools): details.py
    details: dict[str, Any] | None = None


EVALUATION_ERROR = "evaluation_error"


def unevaluated(
    target: Target, metric: str, exc: Exception, start: datetime, now: datetime
) -> WindowOutcome:
    """A target whose evaluation raised: a REVIEW of it alone (its coverage is lost, not
    passed), so the rule's other targets keep their round."""
    return WindowOutcome(
        target=target,
        metric=metric,
        verdict=Verdict.REVIEW,
        reason=EVALUATION_ERROR,
        message=f"{describe_target(target)}: not evaluated, {type(exc).__name__}: {exc}",
        window_start=start,
        window_end=now,
    )


def is_interrupt(exc: Exception, reader: Reader | None = None) -> bool:
    """Shutdown stopping the round's query: the round ends, no target is at fault. DuckDB
    says so as InterruptException, or as an OSError through an Arrow stream; once shutdown
    has interrupted the reader, any failure is its doing."""
    return isinstance(exc, duckdb.InterruptException) or (reader is not None and reader.interrupted)
