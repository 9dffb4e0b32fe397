"""Odd data never stops assembly: cycles, remote parents, odd types, a builder that raises."""

from __future__ import annotations

import json
from datetime import datetime

import pyarrow as pa
import pytest

from collector.assembler import work
from collector.assembler.build import build_trajectory
from collector.assembler.prices import PriceTable
from collector.assembler.spans import SPAN_FIELDS
from collector.assembler.work import Closing, build_batch
from collector.normalize.wire import decode_request
from tests.support.otlp import new_span_id, new_trace_id, trace_request

NOW = datetime(2026, 11, 29, 12, 0, 0)


def rows_for(spans: list[dict]) -> list[dict]:
    body = trace_request(spans).SerializeToString()
    table = decode_request("traces", "protobuf", body, 10_000).table
    rows = table.to_pylist()
    for row in rows:
        row["received_at"] = NOW
    return rows


def test_a_parent_cycle_keeps_every_span_once_and_marks_the_run_incomplete() -> None:
    trace_id = new_trace_id()
    a, b, c = new_span_id(), new_span_id(), new_span_id()
    rows = rows_for(
        [
            {"trace_id": trace_id, "span_id": a, "parent_span_id": b, "name": "a"},
            {"trace_id": trace_id, "span_id": b, "parent_span_id": a, "name": "b"},
            {"trace_id": trace_id, "span_id": c, "parent_span_id": c, "name": "self"},
        ]
    )
    t = build_trajectory(trace_id.hex(), rows, PriceTable.load())
    assert sorted(s.name for s in t.steps) == ["a", "b", "self"]
    assert t.status == "incomplete" and "parent_missing" in t.incomplete_reasons


def test_a_span_with_a_remote_parent_is_the_root() -> None:
    trace_id = new_trace_id()
    root = {
        "trace_id": trace_id,
        "span_id": new_span_id(),
        "parent_span_id": new_span_id(),
        "name": "invoke_agent a",
        "attributes": {"gen_ai.operation.name": "invoke_agent"},
    }
    body = trace_request([root])
    body.resource_spans[0].scope_spans[0].spans[0].flags = 0x301  # parent is remote
    rows = decode_request("traces", "protobuf", body.SerializeToString(), 10_000).table.to_pylist()
    t = build_trajectory(trace_id.hex(), rows, PriceTable.load())
    assert (t.status, t.root_span_id) == ("ok", root["span_id"].hex())


def test_odd_attribute_types_build_and_store() -> None:
    trace_id = new_trace_id()
    root = new_span_id()
    rows = rows_for(
        [
            {
                "trace_id": trace_id,
                "span_id": root,
                "name": "invoke_agent a",
                "attributes": {
                    "gen_ai.operation.name": "invoke_agent",
                    "gen_ai.output.messages": 5,
                },
            },
            {
                "trace_id": trace_id,
                "span_id": new_span_id(),
                "parent_span_id": root,
                "name": "chat m",
                "attributes": {
                    "gen_ai.operation.name": "chat",
                    "gen_ai.output.messages": json.dumps(
                        [
                            {
                                "role": "assistant",
                                "parts": [
                                    {
                                        "type": "tool_call",
                                        "id": 123,
                                        "name": "t",
                                        "arguments": {"x": 1},
                                    }
                                ],
                            }
                        ]
                    ),
                },
            },
            {
                "trace_id": trace_id,
                "span_id": new_span_id(),
                "parent_span_id": root,
                "name": "execute_tool t",
                "start": 1_700_000_000_100_000_000,
                "attributes": {
                    "gen_ai.operation.name": "execute_tool",
                    "gen_ai.tool.name": "t",
                    "sextant.policy.decision": "deny",
                    "sextant.policy.name": 42,
                },
            },
        ]
    )
    spans = pa.Table.from_pylist(rows).select([*SPAN_FIELDS, "received_at"])
    built = build_batch(spans, [Closing(trace_id.hex(), "complete", 1)], {}, NOW)
    assert not built.build_errors
    (step,) = [s for s in built.tables["steps"].to_pylist() if s["span_kind"] == "tool"]
    assert (step["kind"], step["policy_name"], step["tool_call_id"]) == ("policy", "42", "123")


def test_one_trace_that_cannot_be_built_does_not_stop_the_others(monkeypatch) -> None:
    good, bad = new_trace_id(), new_trace_id()
    rows = rows_for(
        [
            {"trace_id": good, "span_id": new_span_id(), "name": "invoke_agent a"},
            {"trace_id": bad, "span_id": new_span_id(), "name": "invoke_agent b"},
        ]
    )
    real = work.build_trajectory

    def flaky(trace_id, *args):
        if trace_id == bad.hex():
            raise ValueError("unreadable")
        return real(trace_id, *args)

    monkeypatch.setattr(work, "build_trajectory", flaky)
    spans = pa.Table.from_pylist(rows).select([*SPAN_FIELDS, "received_at"])
    built = build_batch(
        spans, [Closing(good.hex(), "complete", 1), Closing(bad.hex(), "complete", 1)], {}, NOW
    )
    stored = {r["trace_id"]: r for r in built.tables["trajectories"].to_pylist()}
    assert stored[good.hex()]["status"] == "ok"
    assert stored[bad.hex()]["status"] == "incomplete"
    assert stored[bad.hex()]["incomplete_reasons"] == ["build_error"]
    assert built.build_errors == [f"{bad.hex()}: ValueError: unreadable"]


def test_a_batch_that_raises_is_bisected_down_to_the_traces_that_raise() -> None:
    """A value that stops a whole batch (here: a builder that raises for any batch holding
    two chosen traces) costs those two traces, stored as build errors, and nothing else."""
    ids = [new_trace_id() for _ in range(8)]
    rows = rows_for(
        [{"trace_id": t, "span_id": new_span_id(), "name": "invoke_agent a"} for t in ids]
    )
    spans = pa.Table.from_pylist(rows).select([*SPAN_FIELDS, "received_at"])
    poison = {ids[2].hex(), ids[5].hex()}
    attempts: list[int] = []

    def build(part: pa.Table, closing: list[Closing], evaluator, **kw) -> work.Built:
        attempts.append(len(closing))
        if poison & {c.trace_id for c in closing} and not kw.get("failed"):
            raise OverflowError("Python int too large to convert to C long")
        return build_batch(part, closing, {}, NOW, evaluator, kw.get("failed"))

    closing = [Closing(t.hex(), "complete", 1) for t in ids]
    builds = work.build_isolated(build, spans, closing, None)
    stored = {r["trace_id"]: r for r in work.merged_tables(builds)["trajectories"].to_pylist()}
    assert set(stored) == {t.hex() for t in ids}  # every trace closes once
    errors = {t for t, r in stored.items() if r["build_error"]}
    assert errors == poison
    assert all("OverflowError" in stored[t]["build_error"] for t in poison)
    assert all(stored[t]["status"] == "ok" for t in set(stored) - poison)
    assert len(attempts) < 2 * 8  # halves, not one attempt per trace and never the whole again


def test_an_mcp_server_span_under_a_parent_cycle_still_builds() -> None:
    """The walk from a server span up to the call it answered stops where a cycle closes."""
    trace_id = new_trace_id()
    x, y, server = new_span_id(), new_span_id(), new_span_id()
    call = {"mcp.method.name": "tools/call", "gen_ai.tool.name": "lookup_customer"}
    rows = rows_for(
        [
            {"trace_id": trace_id, "span_id": x, "parent_span_id": y, "name": "x"},
            {"trace_id": trace_id, "span_id": y, "parent_span_id": x, "name": "y"},
            {
                "trace_id": trace_id,
                "span_id": server,
                "parent_span_id": x,
                "name": "tools/call lookup_customer",
                "kind": 2,
                "attributes": call,
            },
        ]
    )
    t = build_trajectory(trace_id.hex(), rows, PriceTable.load())
    assert sorted(s.name for s in t.steps) == ["lookup_customer", "x", "y"]


@pytest.mark.timeout(20)
def test_a_parent_cycle_through_agents_beside_a_named_agent_builds() -> None:
    """Two agent spans that are each other's parent, in a trace that also has a named agent:
    the search for a named agent below them ends (it walked the cycle for ever)."""
    trace_id = new_trace_id()
    a, b = new_span_id(), new_span_id()
    agent = {"gen_ai.operation.name": "invoke_agent"}
    rows = rows_for(
        [
            {
                "trace_id": trace_id,
                "span_id": a,
                "parent_span_id": b,
                "name": "a",
                "attributes": agent,
            },
            {
                "trace_id": trace_id,
                "span_id": b,
                "parent_span_id": a,
                "name": "b",
                "attributes": agent,
            },
            {
                "trace_id": trace_id,
                "span_id": new_span_id(),
                "name": "invoke_agent named",
                "attributes": agent,
            },
        ]
    )
    t = build_trajectory(trace_id.hex(), rows, PriceTable.load())
    assert t.agent_name == "named"
    assert sorted(s.name for s in t.steps) == ["a", "b", "named"]
    assert "parent_missing" in t.incomplete_reasons
