"""Real agent-run captures (LangGraph, OpenAI Agents SDK, plain SDKs) normalize to their runs.

Each capture is sent as OTLP/JSON over HTTP and as protobuf over gRPC; the stored tool steps,
model calls and token sums must match the capture's expected trajectory.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from tests.support.captures import CAPTURES, expected_for, send
from tests.support.server import RunningServer

FILES = sorted([*CAPTURES.glob("*.otlp.json"), *CAPTURES.glob("*.body.json")], key=lambda p: p.name)


def arguments_match(stored: str, expected: dict, capture: str) -> bool:
    value = json.loads(stored)
    if value == expected:
        return True
    # LangGraph + OpenInference records a one-parameter tool's input as the bare value; joining
    # it with the model's tool call happens when the trajectory is assembled.
    return capture.startswith("langgraph-openinference") and [value] == list(expected.values())


@pytest.mark.parametrize("transport", ["http/json", "grpc"])
@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name.split(".")[0])
def test_capture_normalizes_to_its_run(server: RunningServer, path: Path, transport: str) -> None:
    expected = expected_for(path)
    send(server, path, transport)
    rows = server.query_dicts(
        "SELECT * FROM spans WHERE trace_id = ? ORDER BY start_time_unix_nano, span_id",
        [expected["trace_id"]],
    )
    assert len(rows) == expected["span_count"]
    if expected.get("not_an_agent_run"):
        assert [r["step_kind"] for r in rows] == ["agent"]
        assert rows[0]["operation_name"] == "create_agent"
        return

    llm = [r for r in rows if r["step_kind"] == "llm"]
    assert len(llm) == expected["llm_calls"]
    assert sum(r["input_tokens"] for r in llm) == expected["input_tokens"]
    assert sum(r["output_tokens"] for r in llm) == expected["output_tokens"]
    assert all(r["model"] and r["model"].startswith("gpt-4.1-mini") for r in llm)

    tools = [r for r in rows if r["step_kind"] == "tool"]
    calls = expected["tool_calls"]
    assert Counter(r["tool_name"] for r in tools) == Counter(c["name"] for c in calls)
    ordered = [c["name"] for c in calls if c.get("order_sensitive", True)]
    assert [r["tool_name"] for r in tools if r["tool_name"] in ordered] == ordered
    unmatched = list(calls)
    for row in tools:
        match = next(
            c
            for c in unmatched
            if c["name"] == row["tool_name"]
            and arguments_match(row["tool_arguments"], c["arguments"], path.name)
            and (row["status_code"] == "ERROR") == (c["status"] == "error")
        )
        unmatched.remove(match)
        if match.get("error_type"):
            assert row["error_type"] is not None
            assert row["error_type"].endswith(match["error_type"])
        if match["status"] == "ok":
            assert row["tool_result"], f"{row['tool_name']} has no result"
    assert not unmatched

    root = next(r for r in rows if r["parent_span_id"] is None)
    assert root["step_kind"] == "agent"
    agents = {r["agent_name"] for r in rows if r["agent_name"]}
    assert expected["agent"] in agents
