"""A tool's result reaches rules as one parsed value, whatever instrumentation exported it: the
real captures, and the envelopes each instrumentation puts around an approval tool's result."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evaluators.approvals import DEFAULT_APPROVALS
from evaluators.results import parse_result
from tests.support.decoding import tool_fields
from tests.support.trajectories import tool
from tests.unit.assembler.test_build_captures import CAPTURES, build

BOOKINGS = sorted(CAPTURES.glob("*-booking_ok.otlp.json"))
HOLD = {"hold_id": "HLD-4Q7Z2", "seat": "14C", "expires_in_s": 900}
BOOKING = {"booking_ref": "PNR-8XK2QD", "status": "confirmed"}


@pytest.mark.parametrize("path", BOOKINGS, ids=lambda p: Path(p).name.split("-booking")[0])
def test_every_instrumentation_gives_the_same_parsed_result(path: Path) -> None:
    t, _ = build(path)
    results = {s.tool_name: s.result_value for s in t.steps if s.is_tool_call}
    assert results["hold_seat"] == HOLD
    assert results["confirm_booking"] == BOOKING
    assert [f["flight_id"] for f in results["search_flights"]] == ["TP1187", "SK0836"]
    # The stored text is what it was (steps.result is VARCHAR), parsed only for rules.
    assert all(isinstance(s.result, str) for s in t.steps if s.is_tool_call)


APPROVED = {"approved": True, "ticket": "APR-7"}
TOOL_MESSAGE = {
    "content": json.dumps(APPROVED),
    "type": "tool",
    "name": "request_approval",
    "tool_call_id": "call_1",
    "status": "success",
}
SHAPES = {
    "genai-object": {"gen_ai.tool.call.result": json.dumps(APPROVED)},
    "openinference-json": {"openinference.span.kind": "TOOL", "output.value": json.dumps(APPROVED)},
    "openinference-langchain-toolmessage": {
        "openinference.span.kind": "TOOL",
        "output.value": json.dumps({"type": "tool", "data": TOOL_MESSAGE}),
    },
    "openllmetry-langchain-lc": {
        "traceloop.span.kind": "tool",
        "traceloop.entity.output": json.dumps(
            {
                "output": {"lc": 1, "type": "constructor", "kwargs": TOOL_MESSAGE},
                "kwargs": {"tags": []},
            }
        ),
    },
    "openllmetry-decorator": {
        "traceloop.span.kind": "tool",
        "traceloop.entity.output": json.dumps({"output": APPROVED, "kwargs": {}}),
    },
    "openai-agents-python-literal": {
        "openinference.span.kind": "TOOL",
        "output.value": "{'approved': True, 'ticket': 'APR-7'}",
    },
    "toolmessage-dump": {"gen_ai.tool.call.result": json.dumps(TOOL_MESSAGE)},
    "mcp-call-tool-result": {
        "gen_ai.tool.call.result": json.dumps(
            {"content": [{"type": "text", "text": json.dumps(APPROVED)}], "isError": False}
        )
    },
    "json-string-inside-json": {"gen_ai.tool.call.result": json.dumps(json.dumps(APPROVED))},
}


@pytest.mark.parametrize("attrs", SHAPES.values(), ids=SHAPES.keys())
def test_an_approval_result_is_unwrapped_from_each_envelope(attrs: dict) -> None:
    _, _, text = tool_fields(attrs)
    assert parse_result(text) == APPROVED
    step = tool(1, "request_approval", result=text)
    assert DEFAULT_APPROVALS.recognise(step) == (True, "approved")


def test_text_that_is_not_json_stays_text() -> None:
    assert parse_result("Seat 14C held.") == "Seat 14C held."
    assert parse_result("{not json") == "{not json"
    assert parse_result(None) is None
