"""A run built once and grown by the spans that come after, for the runtime guard.

The guard is asked about the same open runs again and again, each time with a few more spans
(its own earlier steps among them), and judges each call on the run with the proposed call as
its latest step. Building the whole run each time cost most of a call. `GrownRun` keeps what
`assemble` built and adds a span in place when the full build would only append its step: the
span lands last in causal order (under a span on the tree's last branch, after its siblings),
adopts no earlier span, is no agent and no MCP span, and says what it ran if it is a tool call.
Any other span, and any run whose spans were read anew, is built whole again: the result is the
full build's, field by field (tests/unit/assembler/test_grow.py holds the two equal over every
capture cut at each tool call and over generated runs).
"""

from __future__ import annotations

from typing import Any

from collector.assembler import messages
from collector.assembler.build import (
    Assembled,
    assemble,
    built_step,
    complete,
    completeness,
    is_create_agent,
    join_one,
)
from collector.assembler.mcp import is_mcp_span
from collector.assembler.prices import PriceTable
from collector.assembler.refusals import guardrail, refuses
from collector.assembler.spans import SpanView, remote_parent
from collector.normalize.values import text as text_or_none
from evaluators.model import Step, Trajectory


def key(span: SpanView) -> tuple[int, int, str]:
    """Siblings' order in `causal_order`."""
    row = span.row
    return (row["start_time_unix_nano"], row["end_time_unix_nano"], row["span_id"])


class GrownRun:
    """One trace's spans built into steps, grown span by span while each lands at the end.

    Used from one thread at a time (the guard's event loop); `grow` may change steps handed out
    in earlier trajectories (a tool span the guard refused inside becomes a guardrail), which
    were judged before."""

    def __init__(
        self, trace_id: str, rows: list[dict[str, Any]], a: Assembled, prices: PriceTable
    ) -> None:
        self.trace_id = trace_id
        self.prices = prices
        self.rows = list(rows)
        self.spans = a.by_id
        self.steps = a.steps
        self.by_step = {s.span_id: s for s in a.steps}
        self.agent_spans = a.agent_spans
        self.agent_of = a.agent_of
        self.llm_order = a.llm_order
        # roots whose parent is named but not here (what makes the run's `parent_missing`)
        self.missing = sum(1 for v, d in a.ordered if d == 0 and missing_parent(v.row))
        self.requested = [c for s in a.llm_order for c in messages.requested_tool_calls(s.attrs)]
        # the requested calls the join took (tool steps lacking their id or arguments were
        # joined); None when no step lacked them: taken are then those of the steps' call ids
        self.joined = a.joined
        self.requester: dict[str, str] = {}  # as `link_requests` reads the model calls
        for step in a.steps:
            if step.kind == "llm":
                self._requester(step, self.spans[step.span_id])
        # parents named by spans that are not here: a span arriving with such an id is adopted
        # by them, which moves them in the tree
        self.wanted = {
            r["parent_span_id"]
            for r in rows
            if r["parent_span_id"] and r["parent_span_id"] not in self.spans
        }
        self.dangling = next((p for r in rows if (p := r["parent_span_id"]) in self.wanted), None)
        last = a.ordered[-1][0]
        self.path = [last]  # the tree's last branch: the last root down to the last span
        while (parent := self.parent_view(last)) is not None:
            self.path.insert(0, parent)
            last = parent
        roots = [s for s, depth in a.ordered if depth == 0]
        self.first = roots[0]
        self.root = next(
            (s for s in roots if not s.row["parent_span_id"] or remote_parent(s.row)), None
        )
        top = next(
            (s for s, _ in a.ordered if s.row["span_id"] in a.agent_spans and s.explicit_agent()),
            next((s for s, _ in a.ordered if s.row["span_id"] in a.agent_spans), None),
        )
        self.agent_name = top.row["agent_name"] or top.row["name"] if top else None
        self.all_create_agent = all(is_create_agent(s) for s in a.spans)
        ordered = [s.row for s, _ in a.ordered]  # the first to say, in causal order
        self.conversation_id = next((c for r in ordered if (c := r["conversation_id"])), None)
        self.user_id = next((u for r in ordered if (u := r["user_id"])), None)
        self.start = min(r["start_time_unix_nano"] for r in rows)
        self.end = max(r["end_time_unix_nano"] for r in rows)
        self.case_id = next((c for s, _ in a.ordered if (c := case_of(s))), None)
        self._read_texts: tuple[tuple[Any, ...], tuple[str | None, str | None]] | None = None

    @classmethod
    def build(
        cls, trace_id: str, rows: list[dict[str, Any]], prices: PriceTable
    ) -> GrownRun | None:
        """The run of `rows` built whole; None when it cannot grow (no spans, a span id twice,
        or a parent cycle: built whole every time)."""
        if not rows:
            return None
        a = assemble(rows, prices)
        roots = sum(1 for s in a.spans if root_of(s, a.by_id))
        if len(a.by_id) != len(rows) or roots != sum(d == 0 for _, d in a.ordered):
            return None
        return cls(trace_id, rows, a, prices)

    def parent_view(self, span: SpanView) -> SpanView | None:
        parent = span.row["parent_span_id"]
        if not parent or parent == span.row["span_id"]:
            return None
        return self.spans.get(parent)

    def grow_by(self, rows: list[dict[str, Any]]) -> bool:
        """Add `rows`, spans that came after the run's; False when one does not land at the
        run's end (build it whole: this object is then spent)."""
        return all(self._add(row) for row in rows)

    def _place(self, span: SpanView) -> int | None:
        """The depth `span` lands at when it lands last in causal order; None when not."""
        sid, parent = span.row["span_id"], span.row["parent_span_id"]
        if sid in self.spans or sid in self.wanted:
            return None
        above = self.spans.get(parent) if parent and parent != sid else None
        if above is None:  # a root: last when it starts after the other roots
            return 0 if key(span) > key(self.path[0]) else None
        at = next((i for i, s in enumerate(self.path) if s is above), None)
        if at is None or (at + 1 < len(self.path) and key(span) < key(self.path[at + 1])):
            return None
        return at + 1

    def _add(self, row: dict[str, Any]) -> bool:
        span = SpanView(row)
        if row["span_id"] in self.wanted:
            return self._adopt(span)
        depth = self._place(span)
        if depth is None or row["step_kind"] == "agent" or is_mcp_span(span):
            return False
        sid, parent = row["span_id"], row["parent_span_id"]
        models = len(self.llm_order)
        step = built_step(
            span, len(self.steps), depth, self.agent_spans, self.agent_of, self.llm_order,
            self.prices,
        )  # fmt: skip
        if len(self.llm_order) > models:  # (read as a model call by the join, whatever its kind)
            if self.joined is not None:
                return False  # more requests could join the joined steps otherwise
            self.requested.extend(messages.requested_tool_calls(span.attrs))
        if step.is_tool_call and not complete(step):
            return False
        if step.is_tool_call and self.joined is not None:
            self.joined.update(self.taken_by(step))
        refused = self._refused(step)
        if refused is not None:
            if self.joined is not None:
                return False  # the tool call it leaves took part in the join
            guardrail(refused)
        if step.kind == "llm":
            self._requester(step, span)
        elif step.is_tool_call and step.tool_call_id:
            step.requested_by = self.requester.get(step.tool_call_id)
        self._attach(span, depth)
        if self.dangling is None and parent and parent != sid and parent not in self.spans:
            self.dangling = parent
        if parent and parent != sid and parent not in self.spans:
            self.wanted.add(parent)
        if depth == 0:
            self.missing += missing_parent(row)
            if self.root is None and (not parent or remote_parent(row)):
                self.root = span
        self.spans[sid] = span
        self.steps.append(step)
        self.by_step[sid] = step
        self.rows.append(row)
        self.all_create_agent = self.all_create_agent and is_create_agent(span)
        self.conversation_id = self.conversation_id or row["conversation_id"]
        self.user_id = self.user_id or row["user_id"]
        self.start = min(self.start, row["start_time_unix_nano"])
        self.end = max(self.end, row["end_time_unix_nano"])
        self.case_id = self.case_id or case_of(span)
        return True

    def taken_by(self, step: Step) -> list[int]:
        """The requested calls a tool step that says its call id takes in the join."""
        return [i for i, c in enumerate(self.requested) if c.get("id") == step.tool_call_id]

    def _adopt(self, span: SpanView) -> bool:
        """A span that earlier spans name as their parent (a tool span exported after the
        guard's step asked inside it): grown in place when those spans, with everything below
        them, are the run's last steps, and the span lands right before them; False when not."""
        row = span.row
        sid, parent = row["span_id"], row["parent_span_id"]
        if sid in self.spans or row["step_kind"] in ("agent", "llm") or self.joined is not None:
            return False
        at = next(i for i, s in enumerate(self.steps) if s.depth == 0 and s.parent_span_id == sid)
        tail = self.steps[at:]
        below = [self.spans[s.span_id] for s in tail]
        if (
            is_mcp_span(span)
            or any(s.depth == 0 and s.parent_span_id != sid for s in tail)
            or any(v.row["step_kind"] == "agent" or is_mcp_span(v) for v in below)
            or (parent in self.by_step and self.by_step[parent].seq >= at)
        ):
            return False
        path = self._branch(at)
        above = self.spans.get(parent) if parent and parent != sid else None
        if above is None:
            if path and key(span) < key(path[0]):
                return False
            depth = 0
        else:
            place = next((i for i, s in enumerate(path) if s is above), None)
            if place is None or (place + 1 < len(path) and key(span) < key(path[place + 1])):
                return False
            depth = place + 1
        step = built_step(span, at, depth, self.agent_spans, self.agent_of, [], self.prices)
        for refused in [
            self._refused(step),
            *(self._refused(c, step) for c in tail if not c.depth),
        ]:
            if refused is not None:
                guardrail(refused)
        if step.is_tool_call and not complete(step):
            return False
        if step.is_tool_call and step.tool_call_id:
            step.requested_by = self.requester.get(step.tool_call_id)
        agent = self.agent_of[sid]
        for moved in tail:
            self.missing -= moved.depth == 0 and missing_parent(self.spans[moved.span_id].row)
            moved.seq += 1
            moved.depth += depth + 1
            moved.agent_name = self.agent_of[moved.span_id] = agent
        self.steps.insert(at, step)
        self.by_step[sid] = step
        self.spans[sid] = span
        self.rows.append(row)
        self.wanted.discard(sid)
        if parent and parent != sid and parent not in self.spans:
            self.wanted.add(parent)
        if depth == 0:
            self.missing += missing_parent(row)
        self.path = [*path[:depth], span, *self.path]
        self._renew(span)
        return True

    def _renew(self, span: SpanView) -> None:
        """What the run says of itself, after `span` was adopted somewhere before its end."""
        row = span.row
        self.dangling = next(
            (p for r in self.rows if (p := r["parent_span_id"]) in self.wanted), None
        )
        views = [self.spans[s.span_id] for s in self.steps]
        roots = [v for v, s in zip(views, self.steps, strict=True) if s.depth == 0]
        self.first = roots[0]
        self.root = next(
            (v for v in roots if not v.row["parent_span_id"] or remote_parent(v.row)), None
        )
        self.all_create_agent = self.all_create_agent and is_create_agent(span)
        self.conversation_id = next((c for v in views if (c := v.row["conversation_id"])), None)
        self.user_id = next((u for v in views if (u := v.row["user_id"])), None)
        self.start = min(self.start, row["start_time_unix_nano"])
        self.end = max(self.end, row["end_time_unix_nano"])
        self.case_id = next((c for v in views if (c := case_of(v))), None)

    def _branch(self, end: int) -> list[SpanView]:
        """The last branch of the tree of the steps before `end`."""
        if not end:
            return []
        last = self.spans[self.steps[end - 1].span_id]
        path = [last]
        while (parent := self.parent_view(last)) is not None:
            path.insert(0, parent)
            last = parent
        return path

    def _refused(self, step: Step, parent: Step | None = None) -> Step | None:
        """The tool step a guard refusal inside its span leaves uncalled; `parent`, the span
        when it is not in the run yet."""
        parent = parent or self.by_step.get(step.parent_span_id or "")
        return parent if refuses(step, parent) else None

    def _attach(self, span: SpanView, depth: int) -> None:
        self.path[depth:] = [span]

    def _requester(self, model: Step, span: SpanView) -> None:
        """A model call's requested tool calls: the first model call to ask for a call id is its
        requester, also of a tool step already here with that id."""
        for call in messages.requested_tool_calls(span.attrs):
            call_id = text_or_none(call.get("id"))
            if not call_id or call_id in self.requester:
                continue
            self.requester[call_id] = model.span_id
            for step in self.steps:
                if step.is_tool_call and step.tool_call_id == call_id:
                    step.requested_by = model.span_id

    def with_row(self, row: dict[str, Any]) -> Trajectory | None:
        """The run with one more tool span (the guard's proposed call) as its last step, the
        run itself left as it is; None when the span would not land last (build it whole)."""
        span = SpanView(row)
        depth = self._place(span)
        if depth is None or row["step_kind"] != "tool" or is_mcp_span(span):
            return None
        parent = row["parent_span_id"]
        agent_of = {parent: self.agent_of.get(parent)} if parent else {}
        step = built_step(span, len(self.steps), depth, self.agent_spans, agent_of, [], self.prices)
        if step.is_tool_call and not complete(step):
            if self.joined is not None:
                used = set(self.joined)
            else:
                ids = {s.tool_call_id for s in self.steps if s.is_tool_call}
                used = {i for i, c in enumerate(self.requested) if c.get("id") in ids}
            join_one(step, self.spans, self.requested, used)
        if step.is_tool_call and step.tool_call_id:
            step.requested_by = self.requester.get(step.tool_call_id)
        missing, root = self.missing > 0, self.root
        if depth == 0:
            missing |= missing_parent(row)
            if root is None and (not parent or remote_parent(row)):
                root = span
        first = root or self.first
        close_reason, reasons = completeness("complete", root, 1, missing)
        status = (
            "incomplete"
            if reasons
            else ("error" if root is not None and root.row["status_code"] == "ERROR" else "ok")
        )
        texts = self._texts(first)
        trajectory = Trajectory(
            trace_id=self.trace_id,
            revision=1,
            status=status,
            close_reason=close_reason,
            agent_run=not (self.all_create_agent and is_create_agent(span)),
            service_name=first.row["service_name"],
            agent_name=self.agent_name,
            service_version=first.row["service_version"],
            steps=[*self.steps, step],
            root_span_id=root.row["span_id"] if root else None,
            root_name=root.row["name"] if root else None,
            conversation_id=self.conversation_id or row["conversation_id"],
            user_id=self.user_id or row["user_id"],
            incomplete_reasons=reasons,
            start_time_unix_nano=min(self.start, row["start_time_unix_nano"]),
            end_time_unix_nano=max(self.end, row["end_time_unix_nano"]),
            span_count=len(self.rows) + 1,
        )
        trajectory.case_id = self.case_id or case_of(span)
        trajectory.input, trajectory.final_output = texts
        return trajectory

    def _texts(self, first: SpanView) -> tuple[str | None, str | None]:
        """The run's input and final output as `summarize` reads them (the first root's, else
        the first and last model calls'), read again only when one of those spans changed."""
        llm = self.llm_order
        spans = (first, llm[0] if llm else None, llm[-1] if llm else None)
        if self._read_texts is not None and all(
            a is b for a, b in zip(self._read_texts[0], spans, strict=True)
        ):
            return self._read_texts[1]
        anchor = first.attrs
        texts = (
            messages.input_text(anchor) or (messages.input_text(llm[0].attrs) if llm else None),
            messages.output_text(anchor) or (messages.output_text(llm[-1].attrs) if llm else None),
        )
        self._read_texts = (spans, texts)
        return texts


def missing_parent(row: dict[str, Any]) -> bool:
    """A root whose parent is named, in this service's data (`causal_order`'s test)."""
    return bool(row["parent_span_id"]) and not remote_parent(row)


def root_of(span: SpanView, by_id: dict[str, SpanView]) -> bool:
    """Whether `causal_order` starts a walk at the span (its parent absent, or itself)."""
    parent = span.row["parent_span_id"]
    return not (parent and parent in by_id and parent != span.row["span_id"])


def case_of(span: SpanView) -> str | None:
    """The case id one span names (`find_case_id` over one span)."""
    if any(span.mentions(word) for word in messages.CASE_HINTS):
        return messages.case_id(span.attrs)
    return None
