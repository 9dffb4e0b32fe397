"""A tool's result as one parsed value, whatever envelope the instrumentation put around it.

The collector stores a tool's result as text (`steps.result`); rules read the value this module
makes of it (`Step.result_value`). Every shape below comes from a real exporter:

- OTel GenAI `gen_ai.tool.call.result`: the value itself, an object or JSON text.
- OpenInference `output.value`: JSON text, or a serialized LangChain ToolMessage
  (`{"type": "tool", "data": {"content": ...}}`) whose `content` is the tool's return value.
- OpenLLMetry `traceloop.entity.output` / `gen_ai.tool.call.result`: a `{"output", "kwargs"}`
  envelope around the return value or around a ToolMessage in LangChain's `lc` form
  (`{"lc": 1, "type": "constructor", "kwargs": {"content": ...}}`).
- A ToolMessage dumped as a plain dict (`{"content": ..., "type": "tool", "tool_call_id": ...}`)
  and MCP `CallToolResult`s (`{"content": [{"type": "text", "text": ...}], "isError": ...}`,
  `structuredContent` preferred when present).
- OpenAI Agents function outputs: the return value as text (`str()` of what the function
  returned): JSON, or a Python literal such as `{'approved': True}`.

JSON inside strings is parsed (a ToolMessage's `content` is usually a JSON string), up to a few
levels deep. Anything else stays the text it was.
"""

from __future__ import annotations

import ast
from typing import Any

import orjson

# Results longer than this are kept as text: parsing them would cost more than rules gain.
PARSE_LIMIT = 1 << 20
# Python literals (`str()` of a returned dict) are parsed by the interpreter's own parser, far
# slower than JSON and recursive: only short ones, which is what function outputs are.
LITERAL_LIMIT = 64 << 10
MAX_DEPTH = 4


def parse_result(text: str | None) -> Any:
    """The tool's return value: envelopes removed, JSON (or Python literal) text decoded."""
    if text is None:
        return None
    return unwrap(text, MAX_DEPTH)


def unwrap(value: Any, depth: int) -> Any:
    for _ in range(depth):
        inner = unwrap_once(value)
        if inner is value:
            return value
        value = inner
    return value


def unwrap_once(value: Any) -> Any:
    """One envelope (or one level of text) removed; `value` itself when there is none."""
    if isinstance(value, str):
        return decoded(value)
    if isinstance(value, dict):
        if set(value) <= {"output", "kwargs"} and "output" in value:
            return value["output"]
        if value.get("type") in ("tool", "constructor"):
            holder = value.get("kwargs") if value.get("lc") else value.get("data")
            if isinstance(holder, dict) and "content" in holder:
                return holder["content"]
            if value.get("type") == "tool" and "content" in value and "tool_call_id" in value:
                return value["content"]
        if "structuredContent" in value and value["structuredContent"] is not None:
            return value["structuredContent"]
        if "content" in value and ("isError" in value or set(value) == {"content"}):
            return value["content"]
    if isinstance(value, list) and value and all(is_text_part(p) for p in value):
        return "\n".join(p["text"] for p in value)
    return value


def is_text_part(part: Any) -> bool:
    return (
        isinstance(part, dict) and part.get("type") == "text" and isinstance(part.get("text"), str)
    )


def decoded(text: str) -> Any:
    """JSON text decoded (or a Python literal such as `str()` of a dict); other text as it is."""
    stripped = text.strip()
    if len(stripped) > PARSE_LIMIT or stripped[:1] not in ("{", "[", '"'):
        return text
    try:
        return orjson.loads(stripped)
    except orjson.JSONDecodeError:
        pass
    if stripped[:1] in ("{", "[") and len(stripped) <= LITERAL_LIMIT:
        try:
            return ast.literal_eval(stripped)
        except (ValueError, SyntaxError, MemoryError, RecursionError, TypeError):
            return text
    return text
