"""Attribute values read in Python, after the native decoder: the text of a value, and a
JSON-looking string as the value it spells (the assembler reads message lists and tool calls
this way). The same rules as the decoder's normalization (collector/native/semconv.rs)."""

from __future__ import annotations

from typing import Any

import orjson

# orjson writes JSON nested at most 254 levels deep, and readers walk values recursively: JSON
# text nested deeper than this is kept as the text itself (and flagged), never as a value.
MAX_JSON_DEPTH = 128


def text(value: Any) -> str | None:
    """A value as a text column: None for null or ""; a string as it is; a list or an object
    as its compact JSON; any other value as Python's str() of it (True, 5, 1.5, 1e+16)."""
    if value is None or value == "":
        return None
    if isinstance(value, str):
        return value
    if isinstance(value, list | dict):
        return orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS).decode()
    return str(value)


def nests_deeper(value: Any, limit: int = MAX_JSON_DEPTH) -> bool:
    """Whether a decoded JSON value has containers nested more than `limit` levels deep."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        if depth > limit:
            return True
        stack.extend((child, depth + 1) for child in children)
    return False


def json_or_text(value: Any) -> tuple[Any, bool]:
    """A JSON-looking string decoded, anything else as it is; and whether it is JSON kept as
    text because it nests too deep. Counting brackets first keeps the walk off the hot path."""
    if not (isinstance(value, str) and value[:1] in ("{", "[", '"')):
        return value, False
    deep = value.count("{") + value.count("[") > MAX_JSON_DEPTH
    try:
        parsed = orjson.loads(value)
    except orjson.JSONDecodeError as exc:
        return value, deep and str(exc).startswith("depth limit")
    if deep and nests_deeper(parsed):
        return value, True
    return parsed, False


def parse_json(value: Any) -> Any:
    """A JSON-looking string decoded; anything else (or JSON nested too deep) as it is."""
    return json_or_text(value)[0]
