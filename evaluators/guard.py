"""A pack's runtime-guard settings, and which of its rules can answer before a tool call runs.

The guard (collector/guard/) asks these rules about the run so far plus the proposed call. A
rule that needs the whole run (a required step, an order, a recovery) cannot decide on a run
that is still going and is not asked.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Literal

from pydantic import Field, field_validator

from evaluators.matchers import Strict, checked_globs, text_matches


class Answer(StrEnum):
    """The guard's answer to one proposed call; one precedence: deny > review > allow."""

    ALLOW = "allow"
    REVIEW = "review"
    DENY = "deny"


ANSWER_STRENGTH = {Answer.ALLOW: 0, Answer.REVIEW: 1, Answer.DENY: 2}


def strongest_answer(answers: list[Answer]) -> Answer:
    """deny over review over allow; allow when there is nothing to weigh."""
    return max(answers, key=ANSWER_STRENGTH.__getitem__, default=Answer.ALLOW)


# Rule types that can decide on a run that is still going: a violation they find in the steps
# so far is not undone by steps that come later.
GUARD_RULE_TYPES = frozenset(
    {"absence", "tool_args", "precedes", "budget", "flow", "mcp", "secrets", "pii"}
)
# Session rule types that can decide before the call runs, over the conversation's earlier
# turns plus the run so far: a session budget (steps, tool calls, repeats, turns) and an
# approval's lifetime. `repeated_failures` needs the call's outcome and is not asked.
GUARD_SESSION_RULE_TYPES = frozenset({"budget", "approval_lifetime"})


class GuardSettings(Strict):
    """E.g. `guard: {writes: ["update_*"], on_unavailable: deny}`."""

    writes: list[str] = Field(
        default_factory=list,
        description="Tools (globs) that change state: what a DOWNGRADE (read-only mode) denies.",
    )
    on_unknown: Answer = Field(
        Answer.REVIEW,
        description="The answer when the run is unknown to the guard or looks partial (spans the"
        " agent has not exported yet): allow, deny or review.",
    )
    on_unavailable: Literal[Answer.ALLOW, Answer.DENY] = Field(
        Answer.DENY,
        description="The answer when the guard cannot decide within its deadline: allow or deny.",
    )
    quarantine: Literal[Answer.ALLOW, Answer.REVIEW, Answer.DENY, "deny_writes"] = Field(
        "deny_writes",
        description="The answer while the target is QUARANTINEd: allow, review, deny every"
        " call, or deny_writes (the `writes` tools only).",
    )

    @field_validator("writes")
    @classmethod
    def _globs(cls, value: list[str]) -> list[str]:
        checked_globs(value)
        return value

    def is_write(self, tool: str) -> bool:
        return bool(self.writes) and text_matches(self.writes, tool)
