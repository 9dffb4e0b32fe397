"""The normalization map of reference/semconv.md § 6, one row per convention."""

from __future__ import annotations

import json

import pytest

from tests.support.decoding import decoded_span, tool_fields


@pytest.mark.parametrize(
    ("attrs", "name", "kind"),
    [
        ({"gen_ai.operation.name": "chat"}, "x", "llm"),
        ({"gen_ai.operation.name": "generate_content"}, "x", "llm"),
        ({"gen_ai.operation.name": "text_completion"}, "x", "llm"),
        ({"gen_ai.operation.name": "embeddings"}, "x", "embedding"),
        ({"gen_ai.operation.name": "retrieval"}, "x", "retrieval"),
        ({"gen_ai.operation.name": "execute_tool"}, "x", "tool"),
        ({"gen_ai.operation.name": "invoke_agent"}, "x", "agent"),
        ({"gen_ai.operation.name": "create_agent"}, "x", "agent"),
        ({"gen_ai.operation.name": "apply_guardrail"}, "x", "guardrail"),
        ({"gen_ai.operation.name": "guardrail_check"}, "x", "guardrail"),
        ({"gen_ai.operation.name": "agent_handoff"}, "x", "handoff"),
        ({"gen_ai.operation.name": "invoke_workflow"}, "x", "other"),
        ({"openinference.span.kind": "LLM"}, "ChatOpenAI", "llm"),
        ({"openinference.span.kind": "TOOL"}, "lookup", "tool"),
        ({"openinference.span.kind": "TOOL"}, "handoff to Billing", "handoff"),
        ({"openinference.span.kind": "AGENT"}, "travel-agent", "agent"),
        ({"openinference.span.kind": "RETRIEVER"}, "r", "retrieval"),
        ({"openinference.span.kind": "RERANKER"}, "r", "retrieval"),
        ({"openinference.span.kind": "EMBEDDING"}, "e", "embedding"),
        ({"openinference.span.kind": "GUARDRAIL"}, "g", "guardrail"),
        ({"openinference.span.kind": "CHAIN"}, "RunnableSequence", "other"),
        ({"openinference.span.kind": "UNKNOWN"}, "u", "other"),
        ({"gen_ai.operation.name": "execute_task", "traceloop.span.kind": "task"}, "t", "other"),
        ({"traceloop.span.kind": "tool"}, "get_weather.tool", "tool"),
        ({"traceloop.span.kind": "agent"}, "researcher.agent", "agent"),
        ({"traceloop.span.kind": "handoff"}, "a → b.handoff", "handoff"),
        ({"llm.request.type": "chat"}, "openai.chat", "llm"),
        ({"llm.request.type": "embedding"}, "openai.embeddings", "embedding"),
        ({"mcp.method.name": "tools/call"}, "tools/call get_weather", "tool"),
        ({}, "execute_tool get_weather", "tool"),
        ({}, "invoke_agent", "agent"),
        ({}, "get_weather.tool", "tool"),
        ({}, "planner.agent", "agent"),
        ({}, "openai.chat", "llm"),
        ({}, "HTTP GET", "other"),
    ],
)
def test_step_kind(attrs: dict, name: str, kind: str) -> None:
    assert decoded_span(attrs, name)["step_kind"] == kind


def test_openllmetry_callback_envelope_is_unwrapped() -> None:
    envelope = {
        "input_str": "{'city': 'Paris'}",
        "tags": [],
        "metadata": {},
        "inputs": {"city": "Paris"},
        "kwargs": {"tool_call_id": "call_1"},
    }
    call_id, arguments, result = tool_fields(
        {
            "gen_ai.tool.call.arguments": json.dumps(envelope),
            "gen_ai.tool.call.result": json.dumps(
                {"output": {"lc": 1, "type": "constructor", "kwargs": {"content": "18C"}}}
            ),
        }
    )
    assert (call_id, json.loads(arguments), result) == ("call_1", {"city": "Paris"}, "18C")


def test_decorator_envelope_and_bare_values() -> None:
    _, arguments, result = tool_fields(
        {
            "traceloop.entity.input": json.dumps({"args": [], "kwargs": {"q": 1}}),
            "traceloop.entity.output": json.dumps("done"),
        }
    )
    assert (json.loads(arguments), result) == ({"q": 1}, "done")
    _, arguments, _ = tool_fields({"input.value": "P-2024-0193"})
    assert json.loads(arguments) == "P-2024-0193"
    _, arguments, _ = tool_fields({"input.value": "{not json"})
    assert json.loads(arguments) == "{not json"


def test_structured_arguments_become_json_text() -> None:
    _, arguments, _ = tool_fields({"gen_ai.tool.call.arguments": {"a": [1, 2]}})
    assert arguments == '{"a":[1,2]}'


def test_unknown_model_falls_through_to_the_next_source() -> None:
    attrs = {"gen_ai.response.model": "unknown", "gen_ai.request.model": "gpt-4.1-mini"}
    assert decoded_span(attrs, "x")["model"] == "gpt-4.1-mini"
    assert decoded_span({"gen_ai.request.model": "unknown"}, "ChatOpenAI.chat")["model"] is None
    assert decoded_span({}, "chat claude-3")["model"] == "claude-3"


def test_error_type_prefers_the_attribute_then_the_exception_event() -> None:
    events = [("exception", {"exception.type": "mod.Boom"})]
    row = decoded_span({"error.type": "Timeout"}, events=events, status_code=2)
    assert row["error_type"] == "Timeout"
    assert decoded_span({}, events=events, status_code=2)["error_type"] == "mod.Boom"
    assert decoded_span({}, events=events, status_code=0)["error_type"] is None
