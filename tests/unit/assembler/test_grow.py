"""A run grown span by span is the run built whole: every real capture asked about at each of
its tool calls (the guard's answers arriving as steps between the calls), and generated runs
whose spans arrive in any order, give the same trajectory and the same guard answers either way.
"""

from __future__ import annotations

import json
import random
from collections import defaultdict
from pathlib import Path
from typing import Any

import orjson
import pytest

from collector.assembler.build import build_trajectory
from collector.assembler.grow import GrownRun
from collector.assembler.held import RunSoFar
from collector.assembler.prices import PriceTable
from collector.guard.call import GuardRequest
from collector.guard.check import judge_call, parent_of_call, proposed_row
from collector.guard.record import guard_span, otlp_body
from collector.guard.service import KeptRun
from collector.normalize.wire import decode_request
from evaluators.base import Decision
from evaluators.rulepack import RulePack, load_text
from tests.support.paths import ROOT, TESTDATA
from tests.support.span_rows import span_row

PRICES = PriceTable.load()
CAPTURES = sorted(
    p
    for folder in ("otlp-captures", "otlp-multi", "otlp-repeats")
    for p in (TESTDATA / folder).glob("*.json")
    if not p.name.endswith(".expected.json")
)
PACKS: list[RulePack] = [
    load_text(p.read_text(), p.name).pack
    for p in sorted([*(ROOT / "rules").glob("*.yaml"), *(ROOT / "rules/examples").glob("*.yaml")])
]
EPOCH = 1_700_000_000 * 10**9  # generated runs' clock
DECISIONS = [(Decision.PASS, []), (Decision.DOWNGRADE, ["x"])]


def rows_of(body: bytes) -> list[dict[str, Any]]:
    return decode_request("traces", "json", body, 1 << 20).table.to_pylist()


def request_for(tool: dict[str, Any], trace_id: str, parent: bool = True) -> GuardRequest:
    """The guard call an agent makes before `tool` (a stored tool span) runs."""
    try:
        arguments = orjson.loads(tool["tool_arguments"] or "{}")
    except orjson.JSONDecodeError:
        arguments = {}
    return GuardRequest.model_validate(
        {
            "trace_id": trace_id,
            "parent_span_id": tool["parent_span_id"] if parent else None,
            "service": tool["service_name"],
            "version": tool["service_version"],
            "tool": {
                "name": tool["tool_name"] or tool["name"],
                "arguments": arguments if isinstance(arguments, dict) else {},
                "tool_call_id": tool["tool_call_id"],
            },
        }
    )


class Asking:
    """An agent asking the guard about one run as its spans arrive: each call judged on the
    run built whole and on the run grown from the previous call's, which must agree."""

    def __init__(self, trace_id: str) -> None:
        self.trace_id = trace_id
        self.arrived: list[dict[str, Any]] = []
        self.grown: GrownRun | None = None
        self.kept: dict[str, KeptRun] = {}  # by service, as the guard keeps them
        self.grew = self.built = 0
        self.calls = self.fast = 0

    def arrive(self, rows: list[dict[str, Any]]) -> None:
        seen = {r["span_id"] for r in self.arrived}
        self.arrived += [r for r in rows if r["span_id"] not in seen]  # the first copy counts

    def ask(self, request: GuardRequest, now_ns: int) -> list[dict[str, Any]]:
        """Judge the call both ways; the guard's step as the store would give it back."""
        self.calls += 1
        rows = [r for r in self.arrived if r["service_name"] == request.service]
        held = RunSoFar(self.arrived, len(self.arrived))  # a list that only grows, as held
        kept = self.kept.pop(request.service, None)
        if kept is not None and kept.grow(held, request.service):
            self.grown = kept.run
            self.grew += 1
        else:
            self.grown = GrownRun.build(self.trace_id, rows, PRICES)
            kept = None if self.grown is None else KeptRun(self.grown, held)
            self.built += 1
        if kept is not None:
            self.kept[request.service] = kept
        assert self.grown is None or self.grown.rows == rows
        span_id = f"{self.calls:016x}"
        if rows and self.grown is not None:
            row = proposed_row(request, span_id, parent_of_call(request, rows), now_ns)
            grown = self.grown.with_row(row)  # None: the call does not land last
            if grown is not None:
                assert grown == build_trajectory(self.trace_id, [*rows, row], PRICES)
                self.fast += 1
        answers = []
        for decision in DECISIONS:
            args = (request, rows, PACKS, decision, span_id, now_ns, PRICES)
            whole, grown = judge_call(*args), judge_call(*args, self.grown)
            assert grown == whole
            answers.append(whole)
        answer = answers[0]
        parent = answer.parent_span_id or request.parent_span_id
        span = guard_span(request, answer, parent, now_ns, now_ns + 1000)
        return rows_of(otlp_body([((request.service, request.version), span)]))


def traces(path: Path) -> dict[str, list[dict[str, Any]]]:
    by_trace: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in rows_of(path.read_bytes()):
        by_trace[row["trace_id"]].append(row)
    return by_trace


@pytest.mark.parametrize("path", CAPTURES, ids=lambda p: p.name)
def test_each_capture_asked_at_each_tool_call_grows_into_the_run_built_whole(path: Path) -> None:
    """Spans arrive as they end; before each tool call starts, the guard is asked about it, and
    its answer arrives as a step of the run (inside the tool's span: framework guardrails ask
    there, so a refusal turns the span into a guardrail step)."""
    asked = 0
    for trace_id, rows in traces(path).items():
        asking = Asking(trace_id)
        pending = sorted(rows, key=lambda r: r["end_time_unix_nano"])
        tools = sorted(
            (r for r in rows if r["step_kind"] == "tool"), key=lambda r: r["start_time_unix_nano"]
        )
        for tool in tools:
            start = tool["start_time_unix_nano"]
            asking.arrive([r for r in pending if r["end_time_unix_nano"] <= start])
            pending = [r for r in pending if r["end_time_unix_nano"] > start]
            step = asking.ask(request_for(tool, trace_id), start)
            inside = [{**r, "parent_span_id": tool["span_id"]} for r in step]
            pending = sorted([*pending, *inside], key=lambda r: r["end_time_unix_nano"])
        asking.arrive(pending)
        if tools:
            asking.ask(request_for(tools[-1], trace_id, parent=False), 2**62)
        asked += asking.calls
    assert asked or "mcp" in path.name or "create_agent" in path.name


def generated_run(rng: random.Random) -> tuple[str, list[dict[str, Any]]]:
    """An agent run of model calls and tools under an agent span, in a random shape: tools
    nested in tools, calls without their id, approvals, case and conversation ids, spans whose
    parent never arrives, an agent span that ends (arrives) first or last."""
    trace_id = rng.randbytes(16).hex()
    agent = rng.randbytes(8).hex()
    ends = rng.choice([10**6, 5])
    rows = [span(trace_id, agent, rng.choice([None, rng.randbytes(8).hex()]), 0, ends, "agent")]
    rows[0].update(agent_name="support-agent", name="invoke_agent support-agent")
    t, parents = 10, [agent]
    for _ in range(rng.randint(1, 12)):
        parent = rng.choice(parents)
        call_id = f"call_{rng.randrange(10**6)}"
        tool = rng.choice(["lookup_customer", "update_account", "request_approval", "search"])
        asked = [{"type": "tool_call", "id": call_id, "name": tool, "arguments": {"q": 1}}]
        llm = span(trace_id, rng.randbytes(8).hex(), parent, t, t + 5, "llm")
        output = [{"role": "assistant", "parts": asked}]
        attrs = {"gen_ai.output.messages": orjson.dumps(output).decode()}
        if rng.random() < 0.2:
            attrs["sextant.case.id"] = f"case-{rng.randrange(5)}"
        llm.update(model="gpt-4.1-mini", input_tokens=10, output_tokens=3)
        llm["attributes"] = orjson.dumps(attrs).decode()
        if rng.random() < 0.2:
            llm["conversation_id"] = f"conv-{rng.randrange(3)}"
        start = t + rng.choice([6, 6, 3, -20])  # mostly after the model call, now and then not
        call = span(trace_id, rng.randbytes(8).hex(), parent, start, start + 4, "tool")
        call.update(tool_name=tool, tool_call_id=call_id if rng.random() < 0.75 else None)
        call["tool_arguments"] = '{"q": 1}'
        call["tool_result"] = json.dumps({"approved": rng.random() < 0.5})
        if rng.random() < 0.1:
            call["parent_span_id"] = rng.randbytes(8).hex()  # its parent is never exported
        rows += [llm, call]
        if rng.random() < 0.3:
            parents.append(call["span_id"])
        t += 20
    return trace_id, rows


def span(trace_id: str, span_id: str, parent: str | None, start: int, end: int, kind: str):
    return span_row(
        span_id,
        f"{kind} {span_id[:4]}",
        EPOCH + start,
        trace_id=trace_id,
        parent_span_id=parent,
        scope_name="generated",
        end_time_unix_nano=EPOCH + end,
        status_code="UNSET",
        step_kind=kind,
        tool_name=None,
        tool_arguments=None,
        service_name="support-desk",
        service_version="3.1.0",
    )


@pytest.mark.parametrize("seed", range(200))
def test_generated_runs_asked_as_their_spans_arrive_in_any_order_grow_the_same(seed: int) -> None:
    """Spans arrive in random batches and orders (an exporter's batches, a late parent); the
    guard is asked between batches about the latest tool call, the next one or any."""
    rng = random.Random(seed)
    trace_id, rows = generated_run(rng)
    asking = Asking(trace_id)
    order = sorted(rows, key=lambda r: r["end_time_unix_nano"] + rng.choice([0, 0, 0, 50]))
    tools = [r for r in rows if r["step_kind"] == "tool"]
    latest = tools[0]
    while order:
        size = rng.randint(1, 4)
        asking.arrive(order[:size])
        order = order[size:]
        latest = next((r for r in reversed(asking.arrived) if r["step_kind"] == "tool"), latest)
        upcoming = next((r for r in order if r["step_kind"] == "tool"), latest)
        for _ in range(rng.randint(0, 3)):
            # the tool that ran last, the one about to run (its span arrives after the guard's
            # step asked inside it), or any
            tool = rng.choice([latest, upcoming, upcoming, rng.choice(tools)])
            if rng.random() < 0.3:
                tool = {**tool, "tool_call_id": None}  # the agent does not say which call
            now = max(r["end_time_unix_nano"] for r in asking.arrived) + rng.choice([1, 1, -30])
            step = asking.ask(request_for(tool, trace_id, parent=rng.random() < 0.8), now)
            if rng.random() < 0.5:
                step = [{**r, "parent_span_id": tool["span_id"]} for r in step]
            asking.arrive(step)
    assert asking.calls == 0 or asking.grew + asking.built == asking.calls


def test_a_call_without_its_id_skips_the_requests_taken_since_the_run_was_built() -> None:
    """A run whose first tool span lacked its call id (joined to the model's request) grows by
    a tool span that says its id; a call asked after it without an id is not joined to the
    request that span took."""
    trace_id, agent = "cd" * 16, "a" * 16
    rows = []
    for i, tool in enumerate(("search", "search")):
        llm = span(trace_id, f"e{2 * i + 1:015x}", agent, 100 * i, 100 * i + 5, "llm")
        asked = [{"type": "tool_call", "id": f"call_{i}", "name": tool, "arguments": {"q": 1}}]
        output = orjson.dumps([{"role": "assistant", "parts": asked}]).decode()
        llm["attributes"] = orjson.dumps({"gen_ai.output.messages": output}).decode()
        call = span(trace_id, f"e{2 * i + 2:015x}", agent, 100 * i + 10, 100 * i + 20, "tool")
        call.update(
            tool_name=tool, tool_arguments='{"q": 1}', tool_call_id=f"call_{i}" if i else None
        )
        rows += [llm, call]
    asking = Asking(trace_id)
    asking.arrive(rows[:3])  # the first call joined to its request; the second's asked for
    asking.ask(request_for(rows[3], trace_id), EPOCH + 10**6)
    asking.arrive(rows[3:])  # the second call, with its id: grows the run
    asking.ask(request_for({**rows[3], "tool_call_id": None}, trace_id), EPOCH + 2 * 10**6)
    assert (asking.built, asking.grew, asking.fast) == (1, 1, 2)


def test_a_tool_span_exported_after_the_guards_step_inside_it_grows_the_run() -> None:
    """The guard's step and a model call inside the tool hang from a span not exported yet
    (their parent missing); the tool span arriving adopts them: the run is no longer missing a
    parent, and what the tool span says before them in causal order (a conversation, a case)
    is the run's."""
    trace_id, agent = "ef" * 16, "a" * 16
    root = span(trace_id, agent, None, 0, 5, "agent")
    root.update(agent_name="support-agent", name="invoke_agent support-agent")
    asked = [{"type": "tool_call", "id": "call_1", "name": "lookup", "arguments": {"q": 1}}]
    llm = span(trace_id, "b" * 16, agent, 10, 15, "llm")
    output = orjson.dumps([{"role": "assistant", "parts": asked}]).decode()
    llm["attributes"] = orjson.dumps({"gen_ai.output.messages": output}).decode()
    tool = span(trace_id, "c" * 16, agent, 20, 40, "tool")
    tool.update(tool_name="lookup", tool_arguments='{"q": 1}', tool_call_id="call_1")
    tool.update(
        conversation_id="conv-7", attributes=orjson.dumps({"sextant.case.id": "case-3"}).decode()
    )
    inner = span(trace_id, "d" * 16, tool["span_id"], 25, 30, "llm")
    inner.update(
        conversation_id="conv-8", attributes=orjson.dumps({"sextant.case.id": "case-9"}).decode()
    )
    asking = Asking(trace_id)
    asking.arrive([root, llm])
    step = asking.ask(request_for(tool, trace_id), EPOCH + 21)
    asking.arrive([{**r, "parent_span_id": tool["span_id"]} for r in step])
    asking.arrive([inner])
    asking.ask(request_for(tool, trace_id), EPOCH + 31)
    asking.arrive([tool])
    asking.ask(request_for(tool, trace_id), EPOCH + 70)
    assert (asking.built, asking.grew, asking.fast) == (1, 2, 2)
    assert asking.grown is not None
    call = proposed_row(request_for(tool, trace_id), "e" * 16, agent, EPOCH + 80)
    t = asking.grown.with_row(call)
    assert t is not None
    assert (t.status, t.conversation_id, t.case_id) == ("ok", "conv-7", "case-3")
