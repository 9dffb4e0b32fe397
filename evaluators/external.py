"""evaluation: a verdict on what another evaluator said about a run.

Agents and evaluators (DeepEval, Ragas, a human review tool, another Sextant) emit the
OpenTelemetry event `gen_ai.evaluation.result` on the span they evaluated: a name, a score, a
label, an explanation. The collector stores each as a result of origin `external`; an
`evaluation` rule turns the ones it names into a verdict with the pack's reason and `on_fail`,
so decision policies count them like any rule's results.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from pydantic import Field, field_validator, model_validator

from evaluators.base import Finding, Verdict
from evaluators.matchers import Strict, checked_globs, text_matches
from evaluators.rules import RuleBase


@dataclass(frozen=True)
class ExternalEvaluation:
    """One `gen_ai.evaluation.result` event, as the collector read it."""

    name: str
    score: float | None
    label: str | None
    explanation: str | None
    span_id: str | None  # the evaluated span (the event's parent)


class FailWhen(Strict):
    score_lt: float | None = Field(None, description="Fail below this score.")
    score_gt: float | None = Field(None, description="Fail above this score (e.g. toxicity).")
    labels: list[str] | None = Field(None, min_length=1, description="Fail on these labels.")

    @model_validator(mode="after")
    def _something(self) -> FailWhen:
        if self.score_lt is None and self.score_gt is None and self.labels is None:
            raise ValueError("give `score_lt`, `score_gt`, `labels` or several")
        return self


class EvaluationRule(RuleBase):
    type: Literal["evaluation"]
    evaluation: str | list[str] = Field(
        description="gen_ai.evaluation.name: a glob or a list of globs."
    )
    fail_when: FailWhen = Field(description="Any condition that holds fails the run.")

    @field_validator("evaluation")
    @classmethod
    def _globs(cls, value: str | list[str]) -> str | list[str]:
        checked_globs(value)
        return value


def names(rule: EvaluationRule, event: ExternalEvaluation) -> bool:
    return text_matches(rule.evaluation, event.name)


def evaluate_event(rule: EvaluationRule, event: ExternalEvaluation) -> Finding:
    """Fail when any `fail_when` condition holds; an event without the score or label a
    condition needs cannot pass it (review), never silently pass."""
    when = rule.fail_when
    evidence = (event.span_id,) if event.span_id else ()
    said = f"{event.name}: {event.label or '-'} ({event.score if event.score is not None else '-'})"
    if event.explanation:
        said += f": {event.explanation}"
    needs_score = when.score_lt is not None or when.score_gt is not None
    if needs_score and event.score is None and when.labels is None:
        return Finding(Verdict.REVIEW, f"no score to judge: {said}", evidence, reason="no_score")
    failed = (
        (when.score_lt is not None and event.score is not None and event.score < when.score_lt)
        or (when.score_gt is not None and event.score is not None and event.score > when.score_gt)
        or (when.labels is not None and event.label in when.labels)
    )
    return Finding(Verdict.FAIL if failed else Verdict.PASS, said, evidence, event.score)
