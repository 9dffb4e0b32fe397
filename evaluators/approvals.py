"""Which steps are approvals and whether each was approved, denied or pending.

An approval's status comes, in this order, from:
1. `sextant.approval.status` on the span: an explicit override, taken as it is;
2. the tool's parsed result (`Step.result_value`), for a tool whose name matches `tools`: the
   pack's own `results` shapes first, then (unless `defaults: false`) the default shapes:
   `approved: true|false`, `status: "approved"|"denied"|"rejected"|"pending"`,
   `decision: "approve"|"approved"|"reject"|"rejected"|"deny"|"denied"`, or the whole result being
   the word `approved`, `denied`, `rejected` or `pending`.
An approval step whose result matches none of these keeps no status (unknown).
"""

from __future__ import annotations

import fnmatch
import re
from dataclasses import replace
from functools import cached_property
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from evaluators.matchers import MISSING, Strict, at_path, checked_path
from evaluators.model import Step, Trajectory

OVERRIDE = "sextant.approval.status"
Status = Literal["approved", "denied", "pending"]


class ApprovalShape(Strict):
    """One place in an approval tool's result and the values that mean granted or refused."""

    path: str = Field(description="JSON path into the tool's parsed result; `$` is all of it.")
    approved: list[Any] = Field(default_factory=list, description="Values that mean granted.")
    denied: list[Any] = Field(default_factory=list, description="Values that mean refused.")
    pending: list[Any] = Field(default_factory=list, description="Values that mean not decided.")

    @field_validator("path")
    @classmethod
    def _path(cls, value: str) -> str:
        return checked_path(value)

    @model_validator(mode="after")
    def _some_values(self) -> ApprovalShape:
        if not (self.approved or self.denied):
            raise ValueError(f"approval shape {self.path!r} needs `approved` or `denied` values")
        return self

    def status(self, result: Any) -> Status | None:
        value = at_path(result, self.path)
        if value is MISSING:
            return None
        for status, values in (
            ("approved", self.approved),
            ("denied", self.denied),
            ("pending", self.pending),
        ):
            if any(same_value(value, v) for v in values):
                return status  # type: ignore[return-value]
        return None


def same_value(value: Any, expected: Any) -> bool:
    """Strings compare without case; true is never 1."""
    if isinstance(value, str) and isinstance(expected, str):
        return value.strip().lower() == expected.lower()
    return value == expected and isinstance(value, bool) == isinstance(expected, bool)


DEFAULT_SHAPES = (
    ApprovalShape(path="$.approved", approved=[True], denied=[False]),
    ApprovalShape(
        path="$.status",
        approved=["approved", "granted"],
        denied=["denied", "rejected"],
        pending=["pending"],
    ),
    ApprovalShape(
        path="$.decision",
        approved=["approve", "approved"],
        denied=["reject", "rejected", "deny", "denied"],
        pending=["pending"],
    ),
    ApprovalShape(
        path="$", approved=["approved"], denied=["denied", "rejected"], pending=["pending"]
    ),
)


class Approvals(Strict):
    """A pack's approval recogniser: which tools ask for approval, and how their results read."""

    tools: list[str] = Field(
        default_factory=lambda: ["*approv*"],
        description="Tool names (globs, case-insensitive) whose calls are approvals.",
    )
    results: list[ApprovalShape] = Field(
        default_factory=list, description="Result shapes of this pack, tried before the defaults."
    )
    defaults: bool = Field(
        True, description="Also try the default shapes (see docs/trajectories.md)."
    )

    @field_validator("tools")
    @classmethod
    def _some_tools(cls, value: list[str]) -> list[str]:
        if not value or any(not name.strip() for name in value):
            raise ValueError("list at least one tool name or glob, e.g. [request_approval]")
        return value

    def model_post_init(self, _: Any) -> None:
        self._tools  # noqa: B018 - compiled with the pack, not on first use

    @cached_property  # not a private attribute: pydantic reads those slowly (`__getattr__`)
    def _tools(self) -> re.Pattern[str]:
        """The globs as one regex, fnmatch's own translation of each: a name matches it when
        it matches any of the globs."""
        return re.compile("|".join(fnmatch.translate(g.lower()) for g in self.tools))

    def is_approval_tool(self, name: str | None) -> bool:
        return self._tools.match((name or "").lower()) is not None

    def status_of(self, result: Any) -> Status | None:
        shapes = [*self.results, *(DEFAULT_SHAPES if self.defaults else ())]
        for shape in shapes:
            found = shape.status(result)
            if found is not None:
                return found
        return None

    def recognise(self, step: Step) -> tuple[bool, str | None]:
        """(is an approval, its status) for one step."""
        explicit = step.attributes.get(OVERRIDE) if step.attributes_json else None
        if explicit is not None:
            return True, str(explicit).lower()
        if step.is_tool_call and self.is_approval_tool(step.tool_name or step.name):
            return True, self.status_of(step.result_value) if step.result is not None else None
        return False, None


DEFAULT_APPROVALS = Approvals()


def with_approvals(t: Trajectory, approvals: Approvals) -> Trajectory:
    """The trajectory as this recogniser reads it: a copy only when some step changes."""
    steps: list[Step] | None = None  # copied at the first step that changes
    for i, step in enumerate(t.steps):
        if not step.is_tool_call and step.kind != "approval":
            continue
        is_approval, status = approvals.recognise(step)
        if not is_approval:
            continue
        if step.kind != "approval" or step.approval_status != status:
            steps = list(t.steps) if steps is None else steps
            steps[i] = replace(step, kind="approval", approval_status=status)
    return t if steps is None else replace(t, steps=steps)
