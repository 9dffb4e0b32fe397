"""GenAI / OpenInference / OpenLLMetry attributes to Sextant's normalized span columns.

The precedence follows `reference/semconv.md` § 6: the first non-empty source wins, OTel GenAI
first, then OpenInference, then OpenLLMetry, then span-name patterns.
"""

from __future__ import annotations

from typing import Any

import orjson

from collector.normalize.values import json_or_text, parse_json, text

OPERATION_KINDS = {
    "chat": "llm",
    "generate_content": "llm",
    "text_completion": "llm",
    "embeddings": "embedding",
    "retrieval": "retrieval",
    "execute_tool": "tool",
    "invoke_agent": "agent",
    "create_agent": "agent",
    "invoke_workflow": "other",
    "apply_guardrail": "guardrail",
    "guardrail_check": "guardrail",
    "agent_handoff": "handoff",
    "handoff": "handoff",
}
OPENINFERENCE_KINDS = {
    "LLM": "llm",
    "EMBEDDING": "embedding",
    "RETRIEVER": "retrieval",
    "RERANKER": "retrieval",
    "TOOL": "tool",
    "AGENT": "agent",
    "GUARDRAIL": "guardrail",
    "CHAIN": "other",
    "EVALUATOR": "other",
    "PROMPT": "other",
    "UNKNOWN": "other",
}
TRACELOOP_KINDS = {
    "agent": "agent",
    "tool": "tool",
    "handoff": "handoff",
    "workflow": "other",
    "task": "other",
    "unknown": "other",
}
LLM_REQUEST_KINDS = {
    "chat": "llm",
    "completion": "llm",
    "embedding": "embedding",
    "rerank": "retrieval",
}
NAME_PREFIXES = (
    ("execute_tool ", "tool"),
    ("invoke_agent", "agent"),
    ("create_agent ", "agent"),
    ("handoff to ", "handoff"),
    ("chat ", "llm"),
    ("embeddings ", "embedding"),
    ("retrieval ", "retrieval"),
    ("apply_guardrail ", "guardrail"),
)
NAME_SUFFIXES = ((".tool", "tool"), (".agent", "agent"), (".handoff", "handoff"), (".chat", "llm"))

MODEL_KEYS = (
    "gen_ai.response.model",
    "gen_ai.request.model",
    "llm.response.model_name",
    "llm.model_name",
    "llm.request.model_name",
    "embedding.model_name",
)
INPUT_TOKEN_KEYS = (
    "gen_ai.usage.input_tokens",
    "gen_ai.usage.prompt_tokens",
    "llm.token_count.prompt",
)
OUTPUT_TOKEN_KEYS = (
    "gen_ai.usage.output_tokens",
    "gen_ai.usage.completion_tokens",
    "llm.token_count.completion",
)
CONVERSATION_KEYS = (
    "gen_ai.conversation.id",
    "session.id",
    "traceloop.association.properties.session_id",
    "traceloop.association.properties.chat_id",
    "traceloop.association.properties.conversation_id",
    "traceloop.association.properties.thread_id",
    "mcp.session.id",
)
USER_KEYS = (
    "user.id",
    "traceloop.association.properties.user_id",
    "gen_ai.user",
    "llm.user",
    "enduser.id",
)
# Values instrumentations write when they do not know; treated as absent.
UNKNOWN_VALUES = frozenset(("", "unknown", "_OTHER"))


def first(attrs: dict[str, Any], keys: tuple[str, ...]) -> Any:
    for key in keys:
        value = attrs.get(key)
        if value is not None and value != "":
            return value
    return None


CONVERSATION_SET = frozenset(CONVERSATION_KEYS)
USER_SET = frozenset(USER_KEYS)
TOKEN_SET = frozenset(INPUT_TOKEN_KEYS + OUTPUT_TOKEN_KEYS)
MODEL_SET = frozenset(MODEL_KEYS)


def normalized(
    attrs: dict[str, Any], name: str, events: list[dict[str, Any]], status_code: int
) -> tuple[Any, ...]:
    """Every normalized column of one span, in SPAN_COLUMNS order from step_kind to the end.

    Most spans carry only a few of the keys probed here, so one set intersection decides which
    lookups are worth making; on the ingest hot path that halves the cost of this function.
    """
    keys = attrs.keys()
    kind = step_kind(attrs, name)
    if kind == "tool":
        tool = tool_name(attrs, name)
        call_id, arguments, result = tool_fields(attrs)
        kept = kept_as_text(attrs)
    else:
        tool = call_id = arguments = result = kept = None
    has_tokens = not TOKEN_SET.isdisjoint(keys)
    return (
        kind,
        text(attrs.get("gen_ai.operation.name")),
        tool,
        call_id,
        arguments,
        result,
        model_name(attrs, name, kind) if kind == "llm" or not MODEL_SET.isdisjoint(keys) else None,
        tokens(attrs, INPUT_TOKEN_KEYS) if has_tokens else None,
        tokens(attrs, OUTPUT_TOKEN_KEYS) if has_tokens else None,
        agent_name(attrs, name, kind),
        text(first(attrs, CONVERSATION_KEYS)) if not CONVERSATION_SET.isdisjoint(keys) else None,
        text(first(attrs, USER_KEYS)) if not USER_SET.isdisjoint(keys) else None,
        error_type(attrs, events, status_code),
        kept,
    )


def label(attrs: dict[str, Any], key: str) -> str:
    """A string attribute used as a lookup key; any other type (a list, a number) is ""."""
    value = attrs.get(key)
    return value if isinstance(value, str) else ""


def step_kind(attrs: dict[str, Any], name: str) -> str:
    kind = OPERATION_KINDS.get(label(attrs, "gen_ai.operation.name"))
    if kind:
        return kind
    oi = attrs.get("openinference.span.kind")
    if oi:
        kind = OPENINFERENCE_KINDS.get(str(oi).upper(), "other")
        if kind == "tool" and name.startswith("handoff to "):
            return "handoff"
        return kind
    kind = TRACELOOP_KINDS.get(label(attrs, "traceloop.span.kind"))
    if kind:
        return kind
    kind = LLM_REQUEST_KINDS.get(label(attrs, "llm.request.type"))
    if kind:
        return kind
    if attrs.get("mcp.method.name") == "tools/call":
        return "tool"
    for prefix, kind in NAME_PREFIXES:
        if name.startswith(prefix):
            return kind
    for suffix, kind in NAME_SUFFIXES:
        if name.endswith(suffix):
            return kind
    return "other"


def tool_name(attrs: dict[str, Any], name: str) -> str | None:
    found = first(attrs, ("gen_ai.tool.name", "tool.name"))
    if found:
        return text(found)
    if attrs.get("traceloop.span.kind") == "tool" and attrs.get("traceloop.entity.name"):
        return text(attrs["traceloop.entity.name"])
    if name.startswith("execute_tool "):
        return name[len("execute_tool ") :]
    if name.startswith("tools/call "):
        return name[len("tools/call ") :]
    if name.endswith(".tool"):
        return name[: -len(".tool")]
    return name or None


def agent_name(attrs: dict[str, Any], name: str, kind: str) -> str | None:
    found = first(attrs, ("gen_ai.agent.name", "agent.name"))
    if found:
        return text(found)
    if attrs.get("traceloop.span.kind") == "agent" and attrs.get("traceloop.entity.name"):
        return text(attrs["traceloop.entity.name"])
    if kind != "agent":
        return None
    for prefix in ("invoke_agent ", "create_agent "):
        if name.startswith(prefix):
            return name[len(prefix) :]
    if name.endswith(".agent"):
        return name[: -len(".agent")]
    if attrs.get("openinference.span.kind") and name:
        return name
    return None


def kept_as_text(attrs: dict[str, Any]) -> list[str] | None:
    """The tool keys whose JSON is kept as text because it nests too deep, None when none."""
    keys = [k for k in TOOL_JSON_KEYS if k in attrs and json_or_text(attrs[k])[1]]
    return keys or None


def unwrap_arguments(value: Any) -> Any:
    """Strip the LangChain callback and decorator envelopes OpenLLMetry puts around arguments."""
    if isinstance(value, dict):
        if "inputs" in value and ("input_str" in value or "tags" in value):
            return value["inputs"]
        if "input_str" in value:
            return parse_json(value["input_str"])
        if set(value) <= {"args", "kwargs"} and "kwargs" in value:
            args = value.get("args") or []
            if not args:
                return value["kwargs"]
            kwargs = value["kwargs"]
            # kwargs that are not an object cannot be merged: the value stays as it came
            return {"args": args, **kwargs} if isinstance(kwargs, dict) else value
    return value


def unwrap_result(value: Any) -> Any:
    """The content of a serialized LangChain ToolMessage, which both OpenInference and
    OpenLLMetry store in place of the tool's return value."""
    if isinstance(value, dict):
        if set(value) <= {"output", "kwargs"} and "output" in value:
            value = value["output"]
        if isinstance(value, dict):
            inner = value.get("kwargs") if value.get("lc") else value.get("data")
            if isinstance(inner, dict) and value.get("type") in ("tool", "constructor"):
                return inner.get("content")
    return value


def message_call_id(value: Any) -> str | None:
    """The tool-call id carried inside a callback envelope or a serialized ToolMessage."""
    if not isinstance(value, dict):
        return None
    for holder in (value.get("kwargs"), value.get("output"), value.get("data")):
        if isinstance(holder, dict):
            call_id = holder.get("tool_call_id")
            if call_id:
                return text(call_id)
            nested = message_call_id(holder)
            if nested:
                return nested
    return None


def as_json_text(value: Any) -> str:
    if isinstance(value, str):
        return orjson.dumps(value).decode()
    return orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS).decode()


TOOL_ARGUMENT_KEYS = ("gen_ai.tool.call.arguments", "input.value", "traceloop.entity.input")
TOOL_RESULT_KEYS = ("gen_ai.tool.call.result", "output.value", "traceloop.entity.output")
TOOL_JSON_KEYS = TOOL_ARGUMENT_KEYS + TOOL_RESULT_KEYS


def tool_fields(attrs: dict[str, Any]) -> tuple[str | None, str | None, str | None]:
    """(call id, arguments as JSON text, result text) of a tool span."""
    raw_args = first(attrs, TOOL_ARGUMENT_KEYS)
    raw_result = first(attrs, TOOL_RESULT_KEYS)
    parsed_args = parse_json(raw_args)
    parsed_result = parse_json(raw_result)
    call_id = first(attrs, ("gen_ai.tool.call.id", "tool.id", "jsonrpc.request.id"))
    if call_id is None:
        call_id = message_call_id(parsed_args) or message_call_id(parsed_result)

    args = unwrap_arguments(parsed_args)
    if raw_args is None:
        arguments = None
    elif isinstance(raw_args, str) and args is parsed_args:
        # Valid JSON text is kept verbatim; anything else (a bare value) becomes a JSON string.
        arguments = raw_args if args is not raw_args else as_json_text(raw_args)
    else:
        arguments = as_json_text(args)

    result = unwrap_result(parsed_result)
    if result is not None and not isinstance(result, str):
        result = (
            raw_result
            if result is parsed_result and isinstance(raw_result, str)
            else (as_json_text(result))
        )
    return (text(call_id), arguments, result)


def model_name(attrs: dict[str, Any], name: str, kind: str) -> str | None:
    for key in MODEL_KEYS:
        value = label(attrs, key)
        if value and value not in UNKNOWN_VALUES:
            return value
    if kind == "llm" and name.startswith("chat ") and name[5:] not in UNKNOWN_VALUES:
        return name[5:]
    return None


INT64_MAX = 2**63 - 1


def tokens(attrs: dict[str, Any], keys: tuple[str, ...]) -> int | None:
    """A token count as an int64; nonsense (negative, infinite, huge, not a number) is None."""
    value = first(attrs, keys)
    if isinstance(value, bool) or value is None:
        return None
    try:
        count = int(value)
    except (TypeError, ValueError, OverflowError):
        return None
    return count if 0 <= count <= INT64_MAX else None


def error_type(attrs: dict[str, Any], events: list[dict[str, Any]], status_code: int) -> str | None:
    found = attrs.get("error.type")
    if found:
        return text(found)
    if status_code != 2:
        return None
    for event in events:
        if event["name"] == "exception":
            exc = event["attributes"].get("exception.type")
            if exc:
                return text(exc)
    return None
