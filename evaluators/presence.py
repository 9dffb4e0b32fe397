"""presence / absence: a matching step must (or must not) occur."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from evaluators.base import Finding, Verdict
from evaluators.matchers import StepMatcher
from evaluators.model import Trajectory
from evaluators.rules import RuleBase


class PresenceRule(RuleBase):
    type: Literal["presence"]
    step: StepMatcher = Field(description="The step that must occur.")
    min_count: int = Field(1, ge=0, description="At least this many matching steps.")
    max_count: int | None = Field(None, ge=0, description="At most this many matching steps.")


class AbsenceRule(RuleBase):
    type: Literal["absence"]
    step: StepMatcher | None = Field(None, description="A step that must not occur.")
    allowed_tools: list[str] | None = Field(
        None, description="Or: every tool call must be one of these names (globs allowed)."
    )

    @model_validator(mode="after")
    def _one_of(self) -> AbsenceRule:
        if (self.step is None) == (self.allowed_tools is None):
            raise ValueError("give exactly one of `step` or `allowed_tools`")
        return self


def evaluate_presence(t: Trajectory, rule: PresenceRule) -> Finding:
    found = [s for s in t.steps if rule.step.matches(s)]
    evidence = tuple(s.span_id for s in found)
    what = rule.step.describe()
    if len(found) < rule.min_count:
        return Finding(
            Verdict.FAIL,
            f"{what} occurred {len(found)} times, expected at least {rule.min_count}",
            evidence,
        )
    if rule.max_count is not None and len(found) > rule.max_count:
        return Finding(
            Verdict.FAIL,
            f"{what} occurred {len(found)} times, at most {rule.max_count} allowed",
            evidence,
        )
    return Finding(Verdict.PASS, f"{what} occurred {len(found)} times", evidence)


def evaluate_absence(t: Trajectory, rule: AbsenceRule) -> Finding:
    if rule.step is not None:
        found = [s for s in t.steps if rule.step.matches(s)]
        what = f"forbidden {rule.step.describe()}"
    else:
        from evaluators.matchers import text_matches

        allowed = rule.allowed_tools or []
        found = [
            s
            for s in t.steps
            if s.is_tool_call and not any(text_matches(p, s.tool_name) for p in allowed)
        ]
        what = "tool outside the allow-list"
    if found:
        names = ", ".join(sorted({s.name for s in found}))
        return Finding(Verdict.FAIL, f"{what} occurred: {names}", tuple(s.span_id for s in found))
    return Finding(Verdict.PASS, f"no {what}")
