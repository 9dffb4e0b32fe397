"""tool_args: the right tool was called with the right parameters."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from evaluators.base import Finding, Verdict
from evaluators.matchers import Condition, StepMatcher, at_path
from evaluators.model import Trajectory
from evaluators.rules import RuleBase


class ToolArgsRule(RuleBase):
    type: Literal["tool_args"]
    step: StepMatcher = Field(description="The tool calls to check (e.g. {name: book_flight}).")
    args: dict[str, Condition] = Field(
        min_length=1, description="JSON path into the arguments -> condition."
    )
    required: bool = Field(False, description="Fail when no such call occurs (else n/a).")


def evaluate_tool_args(t: Trajectory, rule: ToolArgsRule) -> Finding:
    calls = [s for s in t.steps if s.is_tool_call and rule.step.matches(s)]
    if not calls:
        verdict = Verdict.FAIL if rule.required else Verdict.NOT_APPLICABLE
        return Finding(verdict, f"no {rule.step.describe()} call")
    wrong = []
    for step in calls:
        bad = [p for p, c in rule.args.items() if not c.check(at_path(step.arguments, p))]
        if bad:
            wrong.append((step, bad))
    if wrong:
        detail = "; ".join(f"{s.name} (seq {s.seq}): {', '.join(b)}" for s, b in wrong)
        return Finding(
            Verdict.FAIL,
            f"arguments do not satisfy the rule: {detail}",
            tuple(s.span_id for s, _ in wrong),
            1 - len(wrong) / len(calls),
        )
    return Finding(
        Verdict.PASS,
        f"{len(calls)} call(s) with valid arguments",
        tuple(s.span_id for s in calls),
        1.0,
    )
