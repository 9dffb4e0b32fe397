"""consistency: an attribute of matching steps equals the root's (the authorization context)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from evaluators.base import Finding, Verdict
from evaluators.matchers import StepMatcher
from evaluators.model import Trajectory
from evaluators.rules import RuleBase


class ConsistencyRule(RuleBase):
    type: Literal["consistency"]
    step: StepMatcher = Field(description="The steps to check.")
    attribute: str = Field(description="Attribute on those steps, e.g. enduser.id.")
    root_attribute: str | None = Field(None, description="Attribute on the root (default: same).")
    missing: Literal["fail", "pass"] = Field(
        "fail",
        description="When a matching step or the root lacks the attribute: `pass` lets it"
        " through (nothing to compare), `fail` fails the step (or asks for review when the"
        " root has nothing to compare with).",
    )


def evaluate_consistency(t: Trajectory, rule: ConsistencyRule) -> Finding:
    root = t.root
    key = rule.root_attribute or rule.attribute
    expected = root.attributes.get(key) if root is not None else None
    steps = [s for s in t.steps if s is not root and rule.step.matches(s)]
    if not steps:
        return Finding(Verdict.NOT_APPLICABLE, f"no {rule.step.describe()} step")
    if expected is None:
        if rule.missing == "pass":
            return Finding(
                Verdict.PASS, f"the root span has no {key} to compare with (missing: pass)"
            )
        return Finding(Verdict.REVIEW, f"the root span has no {key} to compare with")
    wrong = [
        s
        for s in steps
        if (s.attributes.get(rule.attribute) != expected)
        and not (rule.missing == "pass" and rule.attribute not in s.attributes)
    ]
    if wrong:
        return Finding(
            Verdict.FAIL,
            f"{len(wrong)} step(s) ran with a {rule.attribute} other than the root's {key}:"
            + ", ".join(f" {s.name} (seq {s.seq})" for s in wrong),
            tuple(s.span_id for s in wrong),
        )
    return Finding(Verdict.PASS, f"{len(steps)} step(s) share the root's {key}")
