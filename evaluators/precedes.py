"""precedes: every step B must come after a step A (approval before a privileged write).

A denied approval is never an A, whatever `before` says: asking and being refused is not leave
to act. With `require_approved`, only an approval whose status is `approved` is.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from evaluators.base import Finding, Verdict
from evaluators.matchers import StepMatcher
from evaluators.model import CLOCK_SLACK_NS, Step, Trajectory
from evaluators.rules import RuleBase


class PrecedesRule(RuleBase):
    type: Literal["precedes"]
    before: StepMatcher = Field(description="A: the step that must come first.")
    then: StepMatcher = Field(description="B: every such step needs an A before it.")
    require_ok: bool = Field(False, description="A counts only when it succeeded.")
    same_agent: bool = Field(False, description="A must belong to the same agent as B.")
    require_approved: bool = Field(
        False,
        description="A counts only when it is an approval whose status is `approved` (not"
        " pending, not unrecognised); a denied approval never counts, with or without this.",
    )


def grants(rule: PrecedesRule, a: Step) -> bool:
    """Whether step A, once matched, may stand before a B."""
    if a.approval_status == "denied":
        return False
    if rule.require_approved and (a.kind != "approval" or a.approval_status != "approved"):
        return False
    return not rule.require_ok or a.status == "ok"


def evaluate_precedes(t: Trajectory, rule: PrecedesRule) -> Finding:
    guarded = [s for s in t.steps if rule.then.matches(s)]
    if not guarded:
        return Finding(Verdict.NOT_APPLICABLE, f"no {rule.then.describe()} step")
    violations = []
    for b in guarded:
        ok = any(
            a is not b
            # by time, not tree order: an approval in an earlier sibling subtree counts
            and a.end_time_unix_nano <= b.start_time_unix_nano + CLOCK_SLACK_NS
            and rule.before.matches(a)
            and grants(rule, a)
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
