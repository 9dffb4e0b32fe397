"""What an approval authorizes: its subject, and whether the action was decided after it.

Two checks shared by `precedes` and the session `approval_lifetime` rule:
- **Subject** (`same_subject`): the approval names what it approves (an account, an order) in its
  arguments or its result; the action names what it acts on in its arguments. A binding ties one
  JSON path of each; an approval for C-1001 does not cover a write to C-2002.
- **Causal order** (`causal`): the action must have been asked for by a model call that started
  after the approval's result existed. A model that asks for the approval and the write in one
  turn decided the write before any answer, whatever order the framework then ran them in.

Each check answers yes, no, or "cannot tell" with the reason, never a guess.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic import Field, model_validator

from evaluators.matchers import MISSING, Strict, at_path
from evaluators.model import CLOCK_SLACK_NS, Step, Trajectory

# Reason codes of a review when a check cannot tell.
SUBJECT_UNKNOWN = "approval_subject_unknown"
CAUSAL_UNKNOWN = "causal_order_unknown"


class SubjectBinding(Strict):
    """One JSON path of the approval (arguments or result) that must equal one of the action's
    arguments."""

    approval_argument: str | None = Field(
        None, description="JSON path into the approval's arguments, e.g. `$.customer_id`."
    )
    approval_result: str | None = Field(
        None,
        description="JSON path into the approval's parsed result (envelopes removed), e.g."
        " `$.grant.account`; use it when the approver names the subject in its answer.",
    )
    action_argument: str = Field(
        description="JSON path into the action's arguments that names what it acts on."
    )

    @model_validator(mode="after")
    def _one_side(self) -> SubjectBinding:
        if (self.approval_argument is None) == (self.approval_result is None):
            raise ValueError("set exactly one of approval_argument and approval_result")
        return self

    def approval_path(self) -> str:
        if self.approval_argument is not None:
            return f"arguments {self.approval_argument}"
        return f"result {self.approval_result}"


@dataclass(frozen=True)
class SubjectCheck:
    """`matches` True/False, or None (cannot tell) with `detail` saying which side could not be
    read; `detail` says what differed when False."""

    matches: bool | None
    detail: str


def approval_subject(step: Step, binding: SubjectBinding) -> Any:
    if binding.approval_argument is not None:
        return at_path(step.arguments, binding.approval_argument)
    return at_path(step.result_value, binding.approval_result or "$")


def check_subject(approval: Step, action: Step, bindings: list[SubjectBinding]) -> SubjectCheck:
    """Whether the approval's subject is the action's, binding by binding."""
    for b in bindings:
        wanted = at_path(action.arguments, b.action_argument)
        if wanted is MISSING:
            return SubjectCheck(
                None, f"{action.name} (seq {action.seq}) has no argument {b.action_argument}"
            )
        granted = approval_subject(approval, b)
        if granted is MISSING:
            what = (
                "no arguments recorded"
                if b.approval_argument is not None and approval.arguments is None
                else "no result recorded"
                if b.approval_result is not None and approval.result is None
                else f"nothing at {b.approval_path()}"
            )
            return SubjectCheck(None, f"{approval.name} (seq {approval.seq}) has {what}")
        if granted != wanted:
            return SubjectCheck(
                False,
                f"{approval.name} (seq {approval.seq}) approved {b.approval_path()} ="
                f" {granted!r}, {action.name} (seq {action.seq}) acts on"
                f" {b.action_argument} = {wanted!r}",
            )
    return SubjectCheck(True, "same subject")


def requester(t: Trajectory, step: Step) -> Step | None:
    """The model call that asked for this step, when the instrumentation says which."""
    if step.requested_by is None:
        return None
    return next((s for s in t.steps if s.span_id == step.requested_by), None)


def decided_after(approval: Step, model_call: Step) -> bool:
    """Whether the model call that asked for the action started once the approval had its result
    (and is not the call that asked for the approval itself)."""
    if approval.requested_by is not None and approval.requested_by == model_call.span_id:
        return False
    return approval.end_time_unix_nano <= model_call.start_time_unix_nano + CLOCK_SLACK_NS


def unknown_requester(action: Step) -> str:
    why = (
        "it has no tool-call id"
        if action.tool_call_id is None
        else f"no model output names its call id {action.tool_call_id}"
    )
    return (
        f"{action.name} (seq {action.seq}): which model call asked for it is not recorded ({why})"
    )
