"""A model call's messages read out of each convention's attributes: OpenLLMetry's older
indexed `gen_ai.prompt.N` / `gen_ai.completion.N` (the recorded captures cover the other two)."""

from __future__ import annotations

from collector.assembler.messages import chat


def test_openllmetrys_indexed_prompt_and_completion_are_read_in_order() -> None:
    attrs = {
        "gen_ai.prompt.1.role": "user",
        "gen_ai.prompt.1.content": "Refund order 42",
        "gen_ai.prompt.0.role": "system",
        "gen_ai.prompt.0.content": "You handle refunds.",
        "gen_ai.prompt.2.role": "tool",
        "gen_ai.prompt.2.content": '{"status": "shipped"}',
        "gen_ai.prompt.2.tool_call_id": "call_1",
        "gen_ai.completion.0.role": "assistant",
        "gen_ai.completion.0.tool_calls.0.id": "call_2",
        "gen_ai.completion.0.tool_calls.0.name": "refund",
        "gen_ai.completion.0.tool_calls.0.arguments": '{"order": 42}',
    }
    found = chat(attrs)
    assert [(m["role"], m["text"]) for m in found["input"]] == [
        ("system", "You handle refunds."),
        ("user", "Refund order 42"),
        ("tool", '{"status": "shipped"}'),
    ]
    assert found["input"][2]["answers"] == "call_1"
    (answer,) = found["output"]
    assert answer["text"] is None
    assert answer["tool_calls"] == [{"id": "call_2", "name": "refund", "arguments": {"order": 42}}]


def test_a_span_without_messages_has_none() -> None:
    assert chat({"gen_ai.tool.name": "refund"}) == {"input": [], "output": []}
