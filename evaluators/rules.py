"""Fields every rule shares, whatever its type."""

from __future__ import annotations

from pydantic import Field, field_validator

from evaluators.base import Decision, Severity
from evaluators.matchers import Condition, Strict

REASON_PATTERN = r"^[a-z][a-z0-9_]*$"


class When(Strict):
    """Apply a rule only to some runs: by the user's request or root-span attributes."""

    input: Condition | None = Field(None, description="Condition on the run's input text.")
    attributes: dict[str, Condition] = Field(
        default_factory=dict, description="Root span attribute -> condition."
    )


class RuleBase(Strict):
    id: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$", description="Unique in the pack.")
    description: str = Field("", description="What the rule protects, for people.")
    severity: Severity = Field(Severity.MEDIUM, description="info, low, medium, high, critical.")
    reason: str = Field(pattern=REASON_PATTERN, description="snake_case reason code on failure.")
    on_fail: Decision = Field(Decision.FAIL, description="The decision a failure asks for.")

    @field_validator("on_fail")
    @classmethod
    def _not_pass(cls, value: Decision) -> Decision:
        if value == Decision.PASS:
            raise ValueError("a failure cannot ask for PASS; use REVIEW or a stronger decision")
        return value

    when: When | None = Field(None, description="Only runs matching this are evaluated.")


def no_when(rule: RuleBase) -> None:
    """Session rules read every turn: `when` (a filter of single runs) has no meaning there."""
    if rule.when is not None:
        raise ValueError("`when` filters single runs; a session rule sees all its turns")
