"""Decision policies of a pack: which results, how many, over what window, make which decision.

A policy is data; the collector's decision engine counts matching results in the store and runs
the pending → firing → resolved state machine. Without a policy, a failed rule's `on_fail`
applies on its first failure.
"""

from __future__ import annotations

from pydantic import Field, field_validator, model_validator

from evaluators.base import Decision, Severity, Verdict
from evaluators.durations import parse_duration
from evaluators.matchers import Strict, text_matches

SEVERITY_RANK = {s: i for i, s in enumerate(Severity)}


class PolicyMatch(Strict):
    """Which results count; every given field must hold, lists mean any of."""

    rule: list[str] | None = Field(None, description="Rule ids (globs allowed).")
    reason: list[str] | None = Field(None, description="Reason codes (globs allowed).")
    severity: Severity | None = Field(None, description="At least this severity.")
    verdict: list[Verdict] = Field(
        default_factory=lambda: [Verdict.FAIL], description="Result verdicts that count."
    )

    @field_validator("rule", "reason", mode="before")
    @classmethod
    def _listify(cls, value: object) -> object:
        return [value] if isinstance(value, str) else value

    def matches(self, rule_id: str, reason: str | None, severity: str | None, verdict: str) -> bool:
        if verdict not in self.verdict:
            return False
        if self.rule is not None and not any(text_matches(p, rule_id) for p in self.rule):
            return False
        if self.reason is not None and not any(text_matches(p, reason) for p in self.reason):
            return False
        if self.severity is not None:
            try:
                rank = SEVERITY_RANK[Severity(severity or "")]
            except ValueError:
                return False
            return rank >= SEVERITY_RANK[self.severity]
        return True


class DecisionPolicy(Strict):
    """E.g. QUARANTINE when reason approval_boundary_violation occurs ≥ 1 time in 5m."""

    id: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$", description="Unique in the pack.")
    decision: Decision = Field(description="What the policy decides when its condition holds.")
    when: PolicyMatch = Field(description="Which results count towards the condition.")
    count: int = Field(1, ge=1, description="At least this many matching runs in the window.")
    window: float = Field(600.0, gt=0, description="Sliding window the count is taken over.")
    for_seconds: float = Field(
        0.0, alias="for", ge=0, description="The condition holds this long before firing."
    )
    resolve_after: float = Field(
        300.0, ge=0, description="A firing decision resolves once clear for this long."
    )
    summary: str = Field("", description="One line for the alert; the reasons when empty.")

    @field_validator("window", "for_seconds", "resolve_after", mode="before")
    @classmethod
    def _duration(cls, value: object) -> float:
        return parse_duration(value)

    @model_validator(mode="after")
    def _not_pass(self) -> DecisionPolicy:
        if self.decision == Decision.PASS:
            raise ValueError("a policy decides something other than PASS")
        return self
