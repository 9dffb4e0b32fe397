"""The runtime guard's refusal asked inside a tool's span: that tool did not run.

Frameworks open the tool's span, ask their guardrail inside it, and answer the model with the
refusal instead (collector/guard/). Such a step is a `guardrail`, not a tool call, in a run built
whole (`refused_by_guard`) as in one grown span by span (collector/assembler/grow.py)."""

from __future__ import annotations

from evaluators.model import Step

GUARD_POLICY = "sextant.guard"  # sextant.policy.name of the runtime guard's steps


def refuses(guard: Step, tool: Step | None) -> bool:
    """Whether `guard` is the guard's refusal of `tool`'s own call."""
    return (
        guard.policy_name == GUARD_POLICY
        and guard.policy_decision not in (None, "allow")
        and tool is not None
        and tool.is_tool_call
        and guard.attributes.get("sextant.guard.tool") == (tool.tool_name or tool.name)
    )


def refused_by_guard(steps: list[Step]) -> None:
    """Every tool step of a run built whole that holds the guard's refusal of its call."""
    by_id = {s.span_id: s for s in steps}
    for step in steps:
        parent = by_id.get(step.parent_span_id or "")
        if parent is not None and refuses(step, parent):
            parent.kind = parent.span_kind = "guardrail"


def guardrail(step: Step) -> None:
    """A tool step the guard refused inside its span, in a grown run: no call, no requester."""
    step.kind = step.span_kind = "guardrail"
    step.requested_by = None
