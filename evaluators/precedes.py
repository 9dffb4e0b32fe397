"""precedes: every step B must come after a step A (approval before a privileged write)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from evaluators.base import Finding, Verdict
from evaluators.matchers import StepMatcher
from evaluators.model import Trajectory
from evaluators.rules import RuleBase


class PrecedesRule(RuleBase):
    type: Literal["precedes"]
    before: StepMatcher = Field(description="A: the step that must come first.")
    then: StepMatcher = Field(description="B: every such step needs an A before it.")
    require_ok: bool = Field(False, description="A counts only when it succeeded.")
    same_agent: bool = Field(False, description="A must belong to the same agent as B.")


def evaluate_precedes(t: Trajectory, rule: PrecedesRule) -> Finding:
    guarded = [s for s in t.steps if rule.then.matches(s)]
    if not guarded:
        return Finding(Verdict.NOT_APPLICABLE, f"no {rule.then.describe()} step")
    violations = []
    for b in guarded:
        ok = any(
            a is not b
            # by time, not tree order: an approval in an earlier sibling subtree counts
            and a.end_time_unix_nano <= b.start_time_unix_nano + 1_000_000  # 1 ms clock slack
            and rule.before.matches(a)
            and (not rule.require_ok or a.status == "ok")
            and (not rule.same_agent or a.agent_name == b.agent_name)
            for a in t.steps
        )
        if not ok:
            violations.append(b)
    if violations:
        names = ", ".join(f"{s.name} (seq {s.seq})" for s in violations)
        return Finding(
            Verdict.FAIL,
            f"{names} ran without a preceding {rule.before.describe()}",
            tuple(s.span_id for s in violations),
        )
    return Finding(
        Verdict.PASS,
        f"all {len(guarded)} {rule.then.describe()} step(s) preceded as required",
        tuple(s.span_id for s in guarded),
    )
