"""Text, tool calls and case ids read out of the message attributes of the three conventions."""

from __future__ import annotations

import json
import re
from typing import Any

from collector.normalize.values import parse_json as loads

OI_TOOL_CALL = re.compile(
    r"^llm\.output_messages\.(\d+)\.message\.tool_calls\.(\d+)\.tool_call\.(.+)$"
)
OI_MESSAGE = re.compile(r"^llm\.(input|output)_messages\.(\d+)\.message\.(role|content)$")
LEGACY_TOOL_CALL = re.compile(
    r"^gen_ai\.completion\.(\d+)\.tool_calls\.(\d+)\.(id|name|arguments)$"
)
CASE_KEYS = (
    "sextant.case.id",
    "dataset.example.id",
    "traceloop.association.properties.case_id",
    "traceloop.association.properties.dataset_example_id",
    "traceloop.association.properties.example_id",
)
METADATA_CASE_KEYS = ("case_id", "dataset_example_id", "example_id")
# Substrings that must appear in a span's attribute JSON before it is worth decoding for a case id.
CASE_HINTS = ("case", "example")


def parts_text(message: dict[str, Any]) -> str | None:
    """The text of one GenAI message (`parts`), or of an older `content` string."""
    parts = message.get("parts")
    if isinstance(parts, list):
        texts = [
            p["content"]
            for p in parts
            if isinstance(p, dict) and p.get("type") == "text" and isinstance(p.get("content"), str)
        ]
        return "\n".join(texts) if texts else None
    content = message.get("content")
    return content if isinstance(content, str) and content else None


def genai_text(value: Any, role: str) -> str | None:
    """The last text of `role` in gen_ai.input.messages / gen_ai.output.messages."""
    messages = loads(value)
    if not isinstance(messages, list):
        return None
    found = [
        text
        for m in messages
        if isinstance(m, dict) and m.get("role", role) == role and (text := parts_text(m))
    ]
    return found[-1] if found else None


def openinference_text(attrs: dict[str, Any], direction: str, role: str) -> str | None:
    """The last text of `role` in OpenInference's flattened `llm.{direction}_messages`."""
    by_index: dict[int, dict[str, Any]] = {}
    for key, value in attrs.items():
        match = OI_MESSAGE.match(key)
        if match and match.group(1) == direction:
            by_index.setdefault(int(match.group(2)), {})[match.group(3)] = value
    texts = [
        m["content"]
        for _, m in sorted(by_index.items())
        if m.get("role") == role and isinstance(m.get("content"), str) and m["content"]
    ]
    return texts[-1] if texts else None


def output_text(attrs: dict[str, Any]) -> str | None:
    """What a model call (or an agent span) answered."""
    return genai_text(attrs.get("gen_ai.output.messages"), "assistant") or (
        openinference_text(attrs, "output", "assistant")
    )


def input_text(attrs: dict[str, Any]) -> str | None:
    """The user's request as a model call (or an agent span) received it: the last user
    message, since a later turn of a conversation carries the earlier turns before it."""
    return genai_text(attrs.get("gen_ai.input.messages"), "user") or (
        openinference_text(attrs, "input", "user")
    )


def requested_tool_calls(attrs: dict[str, Any]) -> list[dict[str, Any]]:
    """Tool calls a model asked for, in order: [{"id", "name", "arguments"}]."""
    calls: list[dict[str, Any]] = []
    messages = loads(attrs.get("gen_ai.output.messages"))
    for message in messages if isinstance(messages, list) else []:
        if not isinstance(message, dict):
            continue
        parts = message.get("parts")
        for part in parts if isinstance(parts, list) else []:
            if isinstance(part, dict) and part.get("type") == "tool_call":
                calls.append(
                    {
                        "id": part.get("id"),
                        "name": part.get("name"),
                        "arguments": loads(part.get("arguments")),
                    }
                )
    flattened: dict[tuple[int, int], dict[str, Any]] = {}
    for key, value in attrs.items():
        if match := OI_TOOL_CALL.match(key):
            call = flattened.setdefault((int(match.group(1)), int(match.group(2))), {})
            field = match.group(3)
            if field == "id":
                call["id"] = value
            elif field == "function.name":
                call["name"] = value
            elif field == "function.arguments":
                call["arguments"] = loads(value)
        elif match := LEGACY_TOOL_CALL.match(key):
            call = flattened.setdefault((int(match.group(1)), int(match.group(2))), {})
            call[match.group(3)] = loads(value) if match.group(3) == "arguments" else value
    calls.extend(flattened[k] for k in sorted(flattened))
    return calls


def context_tool_call(attrs: dict[str, Any]) -> dict[str, Any] | None:
    """The call a framework wrapper span was running (LangGraph's `tools` node): name, args, id."""
    for key in ("input.value", "traceloop.entity.input"):
        value = loads(attrs.get(key))
        if isinstance(value, dict):
            inputs = value.get("inputs")
            holder = inputs if isinstance(inputs, dict) else value
            call = holder.get("tool_call")
            if isinstance(call, dict) and isinstance(call.get("name"), str):
                return {"id": call.get("id"), "name": call["name"], "arguments": call.get("args")}
    return None


def case_id(attrs: dict[str, Any]) -> str | None:
    for key in CASE_KEYS:
        value = attrs.get(key)
        if value not in (None, ""):
            return str(value)
    metadata = loads(attrs.get("metadata"))
    if isinstance(metadata, dict):
        for key in METADATA_CASE_KEYS:
            if metadata.get(key) not in (None, ""):
                return str(metadata[key])
    return None


OI_FIELD = re.compile(r"^llm\.(input|output)_messages\.(\d+)\.message\.(.+)$")
OI_CALL_FIELD = re.compile(
    r"^tool_calls\.(\d+)\.tool_call\.(id|function\.name|function\.arguments)$"
)
OI_PART_TEXT = re.compile(r"^contents\.(\d+)\.message_content\.text$")
LEGACY_FIELD = re.compile(r"^gen_ai\.(prompt|completion)\.(\d+)\.(.+)$")
LEGACY_CALL_FIELD = re.compile(r"^tool_calls\.(\d+)\.(id|name|arguments)$")


def message(
    role: str,
    text: str | None,
    calls: list[dict[str, Any]] | None = None,
    answers: str | None = None,
) -> dict[str, Any]:
    """One message as the console shows it: `role`, `text`, the `tool_calls` it asks for and,
    for a tool's answer, the call id it `answers`."""
    return {"role": role, "text": text, "tool_calls": calls or [], "answers": answers}


def genai_messages(value: Any, role: str) -> list[dict[str, Any]]:
    """gen_ai.input.messages / output.messages (and system_instructions, a list of parts)."""
    decoded = loads(value)
    if not isinstance(decoded, list):
        return []
    if decoded and all(isinstance(p, dict) and "role" not in p for p in decoded):
        decoded = [{"role": role, "parts": decoded}]  # system_instructions: bare parts
    out = []
    for m in decoded:
        if not isinstance(m, dict):
            continue
        parts = m.get("parts")
        parts = parts if isinstance(parts, list) else []
        calls = [
            {"id": p.get("id"), "name": p.get("name"), "arguments": loads(p.get("arguments"))}
            for p in parts
            if isinstance(p, dict) and p.get("type") == "tool_call"
        ]
        responses = [
            p for p in parts if isinstance(p, dict) and p.get("type") == "tool_call_response"
        ]
        text = parts_text(m)
        answers = None
        if responses:
            answers = responses[0].get("id")
            response = responses[0].get("response", responses[0].get("result"))
            text = response if isinstance(response, str) else orjson_text(response)
        out.append(message(str(m.get("role", role)), text, calls, answers))
    return out


def orjson_text(value: Any) -> str | None:
    return None if value is None else json.dumps(value, ensure_ascii=False, default=str)


def flattened_messages(
    attrs: dict[str, Any], head: re.Pattern[str], call_field: re.Pattern[str], want: str
) -> list[dict[str, Any]]:
    """OpenInference's `llm.*_messages.N.message.*` or OpenLLMetry's older `gen_ai.prompt.N.*`
    / `gen_ai.completion.N.*`, gathered by index."""
    by_index: dict[int, dict[str, Any]] = {}
    for key, value in attrs.items():
        match = head.match(key)
        if match and match.group(1) == want:
            by_index.setdefault(int(match.group(2)), {})[match.group(3)] = value
    out = []
    for _, fields in sorted(by_index.items()):
        calls: dict[int, dict[str, Any]] = {}
        texts: dict[int, str] = {}
        for name, value in fields.items():
            if found := call_field.match(name):
                field = found.group(2).removeprefix("function.")
                call = calls.setdefault(int(found.group(1)), {})
                call[field] = loads(value) if field == "arguments" else value
            elif (found := OI_PART_TEXT.match(name)) and isinstance(value, str):
                texts[int(found.group(1))] = value
        content = fields.get("content")
        text = content if isinstance(content, str) and content else None
        if text is None and texts:
            text = "\n".join(texts[i] for i in sorted(texts))
        out.append(
            message(
                str(fields.get("role") or ("user" if want in ("input", "prompt") else "assistant")),
                text,
                [
                    {"id": c.get("id"), "name": c.get("name"), "arguments": c.get("arguments")}
                    for _, c in sorted(calls.items())
                ],
                fields.get("tool_call_id"),
            )
        )
    return out


def chat(attrs: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    """A model call's messages, `input` (the system instructions first) and `output`, from
    whichever convention wrote them: GenAI's `gen_ai.*.messages`, OpenInference's
    `llm.*_messages.N`, or OpenLLMetry's older `gen_ai.prompt.N` / `gen_ai.completion.N`."""
    system = genai_messages(attrs.get("gen_ai.system_instructions"), "system")
    given = genai_messages(attrs.get("gen_ai.input.messages"), "user")
    given = given or flattened_messages(attrs, OI_FIELD, OI_CALL_FIELD, "input")
    given = given or flattened_messages(attrs, LEGACY_FIELD, LEGACY_CALL_FIELD, "prompt")
    answered = genai_messages(attrs.get("gen_ai.output.messages"), "assistant")
    answered = answered or flattened_messages(attrs, OI_FIELD, OI_CALL_FIELD, "output")
    answered = answered or flattened_messages(attrs, LEGACY_FIELD, LEGACY_CALL_FIELD, "completion")
    return {"input": system + given, "output": answered}
