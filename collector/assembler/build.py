"""Stored spans of one trace to a Trajectory: the tree in causal order, kinds, joins and totals."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson

from collector.assembler import messages
from collector.assembler.mcp import housekeeping, merge_mcp_calls
from collector.assembler.prices import PriceTable
from collector.assembler.refusals import refused_by_guard
from collector.assembler.spans import SpanView, causal_order, remote_parent
from collector.normalize.values import text as text_or_none
from evaluators.approvals import DEFAULT_APPROVALS
from evaluators.model import Step, Trajectory


def refine_kind(span: SpanView, step: Step) -> None:
    """Approval, policy and state-change steps from the `sextant.*` convention, tool names and
    (for approvals) the default recogniser over the tool's parsed result. A pack's own
    `approvals:` recogniser is applied again when the pack evaluates the run."""
    approval = span.sextant_value("sextant.approval.status")
    if approval is not None or (
        step.span_kind == "tool" and DEFAULT_APPROVALS.is_approval_tool(step.tool_name or step.name)
    ):
        step.kind = "approval"
        step.approval_status = (
            str(approval).lower()
            if approval is not None
            else DEFAULT_APPROVALS.status_of(step.result_value)
            if step.result is not None
            else None
        )
        return
    decision = span.sextant_value("sextant.policy.decision")
    if decision is not None:
        step.kind = "policy"
        step.policy_decision = str(decision).lower()
        step.policy_name = text_or_none(span.sextant_value("sextant.policy.name"))
        return
    target = span.sextant_value("sextant.state.target")
    if target is not None:
        step.kind = "state_change"
        step.state_target = str(target)


def cost_of(span: SpanView, step: Step, prices: PriceTable) -> float | None:
    """The agent's own cost attribute wins over the price table."""
    if span.mentions("cost"):
        attrs = span.attrs
        for key in ("llm.cost.total", "gen_ai.usage.cost", "gen_ai.usage.cost_usd"):
            if isinstance(attrs.get(key), int | float):
                return float(attrs[key])
        prompt, completion = attrs.get("llm.cost.prompt"), attrs.get("llm.cost.completion")
        if isinstance(prompt, int | float) and isinstance(completion, int | float):
            return float(prompt + completion)
    return prices.cost(step.model, step.input_tokens, step.output_tokens)


def join_tool_calls(
    steps: list[Step], spans: dict[str, SpanView], llm_order: list[SpanView]
) -> set[int] | None:
    """Give tool steps the id and arguments their span lacks, from the call the model requested;
    the requested calls (their index) taken, or None when no step lacked them.

    OpenInference's LangChain tool spans carry a one-argument tool's input as the bare value and
    no call id; the wrapping `tools` span and the model's tool calls carry both.
    """
    tools = [s for s in steps if s.is_tool_call]
    if all(complete(s) for s in tools):
        return None  # every tool span said what it ran (the usual case): nothing to join
    requested = [call for span in llm_order for call in messages.requested_tool_calls(span.attrs)]
    used: set[int] = set()
    for step in tools:
        if complete(step):
            used.update(i for i, c in enumerate(requested) if c.get("id") == step.tool_call_id)
            continue
        join_one(step, spans, requested, used)
    return used


def complete(step: Step) -> bool:
    """A tool step that says what it ran: its call id and its arguments as an object."""
    return bool(step.tool_call_id) and isinstance(step.arguments, dict)


def join_one(
    step: Step, spans: dict[str, SpanView], requested: list[dict[str, Any]], used: set[int]
) -> None:
    """One tool step lacking its id or arguments joined to the call the model requested (the
    wrapping span's call, else the earliest of that tool not `used`)."""
    parent = spans.get(step.parent_span_id or "")
    call = messages.context_tool_call(parent.attrs) if parent else None
    if call is None or call["name"] != step.tool_name:
        index = first_request(requested, used, step.tool_name, step.arguments)
        if index is None:
            return
        used.add(index)
        call = requested[index]
    if not isinstance(step.arguments, dict) and isinstance(call.get("arguments"), dict):
        step.arguments = call["arguments"]
    step.tool_call_id = step.tool_call_id or text_or_none(call.get("id"))


def link_requests(steps: list[Step], spans: dict[str, SpanView]) -> None:
    """Set each tool call's `requested_by`: the model call whose output carries its call id.

    This is causal order, not clock order: two calls asked for in one model turn share their
    requester, however the framework then scheduled them. A call whose id no model output names
    (no id recorded, output messages not captured) keeps None, and rules that need it say so.
    """
    requester: dict[str, str] = {}
    for step in steps:
        if step.kind == "llm":
            for call in messages.requested_tool_calls(spans[step.span_id].attrs):
                call_id = text_or_none(call.get("id"))
                if call_id:
                    requester.setdefault(call_id, step.span_id)  # the first model call to ask
    for step in steps:
        if step.is_tool_call and step.tool_call_id:
            step.requested_by = requester.get(step.tool_call_id)


def first_request(
    requested: list[dict[str, Any]], used: set[int], name: str | None, arguments: Any
) -> int | None:
    """The earliest unused requested call of this tool (with these arguments, when known)."""
    for i, call in enumerate(requested):
        if i in used or call.get("name") != name:
            continue
        if not isinstance(arguments, dict) or call.get("arguments") == arguments:
            return i
    return None


@dataclass
class Assembled:
    """A trace's spans as steps in causal order, before the run's totals are summed up: what
    `build_trajectory` summarizes, and what a run grown span by span starts from
    (collector/assembler/grow.py)."""

    spans: list[SpanView]
    by_id: dict[str, SpanView]
    ordered: list[tuple[SpanView, int]]
    missing_parent: bool
    agent_spans: set[str]
    agent_of: dict[str, str | None]
    steps: list[Step]
    llm_order: list[SpanView]
    joined: set[int] | None  # the requested calls taken by the join; None: nothing joined


def assemble(rows: list[dict[str, Any]], prices: PriceTable) -> Assembled:
    """The steps of a trace's stored spans, every whole-run pass done."""
    spans = [SpanView(r) for r in rows]
    ordered, missing_parent = causal_order(spans)
    by_id = {s.row["span_id"]: s for s in spans}
    agent_spans = real_agents(ordered, by_id)
    steps: list[Step] = []
    agent_of: dict[str, str | None] = {}
    llm_order: list[SpanView] = []
    for seq, (span, depth) in enumerate(ordered):
        steps.append(built_step(span, seq, depth, agent_spans, agent_of, llm_order, prices))
    merge_mcp_calls(steps, by_id)  # before the join: a folded MCP layer takes no call
    refused_by_guard(steps)
    joined = join_tool_calls(steps, by_id, llm_order)
    link_requests(steps, by_id)
    return Assembled(
        spans, by_id, ordered, missing_parent, agent_spans, agent_of, steps, llm_order, joined
    )


def built_step(
    span: SpanView,
    seq: int,
    depth: int,
    agent_spans: set[str],
    agent_of: dict[str, str | None],
    llm_order: list[SpanView],
    prices: PriceTable,
) -> Step:
    """One span's step with what the span alone says (its result parsed, a model call's cost,
    the `sextant.*` kinds); a model call is added to `llm_order`."""
    step = step_of(span, seq, depth, agent_spans, agent_of)
    if step.result is not None:
        step.result_value  # noqa: B018 - parsed once here, where the step is built
    if step.kind == "llm":
        llm_order.append(span)
        step.cost_usd = cost_of(span, step, prices)
    if span.mentions("sextant.") or (step.kind == "tool" and "approv" in step.name.lower()):
        refine_kind(span, step)
    return step


def build_trajectory(
    trace_id: str,
    rows: list[dict[str, Any]],
    prices: PriceTable,
    revision: int = 1,
    close_reason: str = "complete",
    late_spans: int = 0,
) -> Trajectory:
    a = assemble(rows, prices)
    return summarize(
        trace_id,
        revision,
        close_reason,
        late_spans,
        a.ordered,
        a.steps,
        a.llm_order,
        a.missing_parent,
        a.agent_spans,
    )


def real_agents(ordered: list[tuple[SpanView, int]], by_id: dict[str, SpanView]) -> set[str]:
    """Span ids of the spans that are agents: graph node visits are not, and agent wrappers
    without a name of their own ("Agent workflow") yield to a named agent below them."""
    agent_spans = {
        s.row["span_id"]
        for s, _ in ordered
        if s.row["step_kind"] == "agent" and not s.is_graph_node()
    }
    explicit = {sid for sid in agent_spans if by_id[sid].explicit_agent()}
    if explicit:
        agent_spans = {
            sid
            for sid in agent_spans
            if sid in explicit or not has_named_agent_below(by_id[sid], explicit)
        }
    return agent_spans


def step_of(
    span: SpanView,
    seq: int,
    depth: int,
    agent_spans: set[str],
    agent_of: dict[str, str | None],
) -> Step:
    """One span as a step; records in `agent_of` which agent the span's children belong to."""
    row = span.row
    sid, parent = row["span_id"], row["parent_span_id"]
    inherited = agent_of.get(parent) if parent else None
    base = row["step_kind"]
    if base == "agent" and sid not in agent_spans:
        base = "other"
    own_agent = (row["agent_name"] or row["name"]) if base == "agent" else None
    agent_of[sid] = own_agent or inherited
    return Step(
        seq=seq,
        span_id=sid,
        parent_span_id=parent,
        depth=depth,
        kind=base,
        span_kind=base,
        name=step_name(row, base, own_agent),
        status="error" if row["status_code"] == "ERROR" else "ok",
        start_time_unix_nano=row["start_time_unix_nano"],
        end_time_unix_nano=row["end_time_unix_nano"],
        agent_name=own_agent or inherited,
        tool_name=row["tool_name"],
        tool_call_id=row["tool_call_id"],
        arguments=orjson.loads(row["tool_arguments"]) if row["tool_arguments"] else None,
        result=row["tool_result"],
        error_type=row["error_type"],
        model=row["model"],
        input_tokens=row["input_tokens"] if base == "llm" else None,
        output_tokens=row["output_tokens"] if base == "llm" else None,
        attributes_json=row["attributes"],
    )


def has_named_agent_below(span: SpanView, explicit: set[str]) -> bool:
    """Whether a named agent is below `span`; each span is walked once, so a parent cycle
    (bad data) ends the walk instead of looping for ever."""
    stack = list(span.children)
    seen: set[int] = set()
    while stack:
        child = stack.pop()
        if child.row["span_id"] in explicit:
            return True
        if id(child) not in seen:
            seen.add(id(child))
            stack.extend(child.children)
    return False


def step_name(row: dict[str, Any], kind: str, agent: str | None) -> str:
    if row["tool_name"] and kind == "tool":
        return row["tool_name"]
    if kind in ("llm", "embedding") and row["model"]:
        return row["model"]
    if kind == "agent" and agent:
        return agent
    return row["name"] or ""


def summarize(
    trace_id: str,
    revision: int,
    close_reason: str,
    late_spans: int,
    ordered: list[tuple[SpanView, int]],
    steps: list[Step],
    llm_order: list[SpanView],
    missing_parent: bool,
    agent_spans: set[str],
) -> Trajectory:
    roots = [s for s, depth in ordered if depth == 0]
    root = next((s for s in roots if not s.row["parent_span_id"] or remote_parent(s.row)), None)
    first = root or (roots[0] if roots else None)
    top_agent = next(
        (s for s, _ in ordered if s.row["span_id"] in agent_spans and s.explicit_agent()),
        next((s for s, _ in ordered if s.row["span_id"] in agent_spans), None),
    )
    close_reason, reasons = completeness(close_reason, root, revision, missing_parent)
    # Some instrumentations emit a one-span `create_agent` trace per agent at start-up, and MCP
    # clients and servers traces of their own protocol chatter: neither is an agent run.
    agent_run = not all(is_create_agent(s) for s, _ in ordered) and not housekeeping(
        [s for s, _ in ordered], steps
    )
    status = (
        "incomplete"
        if reasons
        else ("error" if root is not None and root.row["status_code"] == "ERROR" else "ok")
    )
    rows = [s.row for s, _ in ordered]
    trajectory = Trajectory(
        trace_id=trace_id,
        revision=revision,
        status=status,
        close_reason=close_reason,
        agent_run=agent_run,
        service_name=(first.row["service_name"] if first else None),
        agent_name=top_agent.row["agent_name"] or top_agent.row["name"] if top_agent else None,
        service_version=(first.row["service_version"] if first else None),
        steps=steps,
        root_span_id=root.row["span_id"] if root else None,
        root_name=root.row["name"] if root else None,
        conversation_id=next((r["conversation_id"] for r in rows if r["conversation_id"]), None),
        user_id=next((r["user_id"] for r in rows if r["user_id"]), None),
        incomplete_reasons=reasons,
        start_time_unix_nano=min(r["start_time_unix_nano"] for r in rows),
        end_time_unix_nano=max(r["end_time_unix_nano"] for r in rows),
        span_count=len(rows),
        late_spans=late_spans,
    )
    anchor = first.attrs if first else {}
    trajectory.case_id = find_case_id([s for s, _ in ordered])
    trajectory.input = messages.input_text(anchor) or (
        messages.input_text(llm_order[0].attrs) if llm_order else None
    )
    trajectory.final_output = messages.output_text(anchor) or (
        messages.output_text(llm_order[-1].attrs) if llm_order else None
    )
    return trajectory


def completeness(
    close_reason: str, root: SpanView | None, revision: int, missing_parent: bool
) -> tuple[str, list[str]]:
    """The close reason as it stands, and why the trajectory is incomplete (if it is)."""
    if close_reason == "incomplete_timeout" and root is not None and revision > 1:
        # Late spans of a trace whose root was stored with an earlier revision.
        close_reason = "complete"
    reasons = []
    if root is None:
        reasons.append("root_missing")
    if missing_parent:
        reasons.append("parent_missing")
    if close_reason != "complete":
        reasons.append(close_reason)
    return close_reason, reasons


def is_create_agent(span: SpanView) -> bool:
    return span.row["name"].startswith("create_agent") or (
        span.mentions("create_agent") and span.attrs.get("gen_ai.operation.name") == "create_agent"
    )


def find_case_id(spans: list[SpanView]) -> str | None:
    """The repeated task this run belongs to: the first span (root first) that names one."""
    for span in spans:
        if any(span.mentions(word) for word in messages.CASE_HINTS):
            found = messages.case_id(span.attrs)
            if found:
                return found
    return None
