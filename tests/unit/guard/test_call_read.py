"""The native listeners read a guard call's body (collector/native/guard_listen.rs) exactly as
Python's model reads it, on seeded generated bodies: every body the listener answers itself is
one `GuardRequest` accepts, with the same run, target, tool, tool call id and arguments (as
orjson writes them); the rest it leaves to Python, which answers them as before. The
generated bodies mix the plain form with what is near it: ids in upper case, with a trailing
newline or all zero, text of 256 and 257 code points, "" and null, numbers where text belongs,
floats and integers past 64 bits in the arguments, deep nesting, control characters, duplicate
keys, unknown keys, MCP calls, and bytes that are not JSON at all."""

from __future__ import annotations

import json
import random
from typing import Any

import orjson
import pytest
from google.protobuf.message import DecodeError
from pydantic import ValidationError

from collector.guard import wire
from collector.guard.call import GuardRequest
from collector.normalize import _native as native

BODIES = 100_000
MISSING = object()

TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
SPAN = "00f067aa0ba902b7"
# Each field: what the listener reads here, and what is near it.
TRACE_IDS = (
    [TRACE, TRACE.upper(), "4BF92f3577b34da6A3ce929d0e0e4736"],
    [*("0" * 32, TRACE[:31], TRACE + "0", TRACE + "\n", TRACE.replace("4", "４"), "g" * 32)],
    [7, None, MISSING, ""],
)
SPAN_IDS = ([MISSING, None, SPAN, SPAN.upper()], ["0" * 16, SPAN[:15], SPAN + "\n", "", 12])
NAMES = (
    [*("support-desk", "update_account", "lookup_customer", "bøt", "ß", "İnfo", "x" * 256)],
    [*("é" * 256, "é" * 257, "😀" * 256, "x" * 257, "", " ", "a\nb", 7, True, None, MISSING)],
)
OPTIONAL_TEXT = (
    [MISSING, None, "support-agent", "1.0.0", "x" * 256, "é" * 256, "tab\t"],
    ["", "x" * 257, "😀" * 257, 0, False, ["a"], {"a": 1}],
)
LEAVES = (
    [*("C-1042", "", "ünïcode", "tab\tline\nfeed", "\u2028", "😀", "\ud7ff", "\\", '"')],
    [*(0, -1, 2**63 - 1, -(2**63), 2**64 - 1, True, False, None)],
    [*("bell\x07", "nul\x00", "\x1f", -(2**63) - 1, 2**64, 10**30, 1.5, 1e16, -0.0)],
)
KINDS = ([MISSING, "tool"], ["mcp", "TOOL", None, 1, ""])
SERVERS = ([MISSING, None], ["", "crm", 3])


def pick(rng: random.Random, *choices: list[Any]) -> Any:
    """From the first list most of the time, the others now and then."""
    odd = rng.random() < 0.12
    return rng.choice(rng.choice(choices[1:]) if odd else choices[0])


def value(rng: random.Random, depth: int) -> Any:
    if depth < 70 and rng.random() < 0.35:
        if rng.random() < 0.5:
            return [value(rng, depth + 1) for _ in range(rng.randint(0, 3))]
        return {key(rng): value(rng, depth + 1) for _ in range(rng.randint(0, 3))}
    return pick(rng, *LEAVES)


def key(rng: random.Random) -> str:
    return pick(rng, ["customer_id", "email", "a", "b", "ключ", "", "😀", "k\n"], ["k\x01"])


def deep(levels: int) -> dict[str, Any]:
    nested: Any = 1
    for _ in range(levels):
        nested = {"d": nested}
    return {"n": nested}


def arguments(rng: random.Random) -> Any:
    if rng.random() < 0.1:
        return rng.choice([MISSING, None, [], "x", 1, deep(63), deep(64), deep(66), {}])
    return {key(rng): value(rng, 1) for _ in range(rng.randint(0, 4))}


def tool(rng: random.Random) -> Any:
    if rng.random() < 0.03:
        return rng.choice([MISSING, None, [], "update_account"])
    fields: dict[str, Any] = {
        "name": pick(rng, *NAMES),
        "arguments": arguments(rng),
        "kind": pick(rng, *KINDS),
        "tool_call_id": pick(rng, *OPTIONAL_TEXT),
        "mcp_server": pick(rng, *SERVERS),
    }
    if rng.random() < 0.02:
        fields["priority"] = 1
    return {k: v for k, v in fields.items() if v is not MISSING}


def call(rng: random.Random) -> dict[str, Any]:
    fields: dict[str, Any] = {
        "trace_id": pick(rng, *TRACE_IDS),
        "parent_span_id": pick(rng, *SPAN_IDS),
        "service": pick(rng, *NAMES),
        "agent": pick(rng, *OPTIONAL_TEXT),
        "version": pick(rng, *OPTIONAL_TEXT),
        "conversation_id": pick(rng, *OPTIONAL_TEXT),
        "tool": tool(rng),
    }
    if rng.random() < 0.02:
        fields["priority"] = 1
    return {k: v for k, v in fields.items() if v is not MISSING}


def json_body(rng: random.Random) -> bytes:
    """A generated call as JSON text, in one of the ways a client may write it."""
    fields = call(rng)
    spacing = rng.choice([(",", ":"), (", ", ": "), (",\n ", " :  ")])
    text = json.dumps(fields, ensure_ascii=rng.random() < 0.5, separators=spacing)
    pick = rng.random()
    if pick < 0.05:  # a duplicate key: the later one counts
        text = '{"service": "earlier", ' + text[1:] if len(text) > 2 else text
    elif pick < 0.07:
        text = '{"tool": {"name": "earlier"}, ' + text[1:] if len(text) > 2 else text
    elif pick < 0.09:
        text = rng.choice([text[: rng.randrange(len(text))], text + "}", text + " x", "[" + text])
    data = text.encode("utf-8", "surrogatepass")
    if rng.random() < 0.02:
        data = rng.choice([b"\xef\xbb\xbf" + data, data + b"\xff", b"\x00" + data])
    return data


def protobuf_body(rng: random.Random) -> bytes:
    """A generated call as a gRPC `CheckRequest`: unset is "", and the arguments are text."""

    def text(v: Any) -> str:
        return v if isinstance(v, str) else ""

    fields = call(rng)
    proposed = fields.get("tool")
    proposed = proposed if isinstance(proposed, dict) else {}
    args = proposed.get("arguments", MISSING)
    if args is MISSING:
        arguments_json = ""
    elif rng.random() < 0.05:
        arguments_json = rng.choice(["{", "[]", "null", "1", '{"a": NaN}', " {} "])
    else:
        arguments_json = json.dumps(args, ensure_ascii=rng.random() < 0.5)
    request = wire.CheckRequest(
        trace_id=text(fields.get("trace_id")),
        parent_span_id=text(fields.get("parent_span_id")),
        service=text(fields.get("service")),
        agent=text(fields.get("agent")),
        version=text(fields.get("version")),
        conversation_id=text(fields.get("conversation_id")),
    )
    if "tool" in fields:
        request.tool.CopyFrom(
            wire.ProposedCall(
                name=text(proposed.get("name")),
                arguments_json=arguments_json,
                kind=text(proposed.get("kind")),
                tool_call_id=text(proposed.get("tool_call_id")),
                mcp_server=text(proposed.get("mcp_server")),
            )
        )
    return request.SerializeToString()


def as_python_reads(body: bytes, protobuf: bool) -> GuardRequest | None:
    try:
        if protobuf:
            return wire.request_of(body)
        return GuardRequest.model_validate_json(body)
    except (ValidationError, orjson.JSONDecodeError, DecodeError, UnicodeDecodeError):
        return None


def first_difference(body: bytes, protobuf: bool) -> str | None:
    """None when the listener leaves the body to Python or reads it as Python does."""
    read = native.guard_call_read(body, protobuf)
    if read is None:
        return None
    model = as_python_reads(body, protobuf)
    if model is None:
        return f"the listener answers {body!r}, which Python refuses"
    tool = model.tool
    expected = (
        *(model.trace_id, model.parent_span_id, model.service, model.agent, model.version),
        *(tool.name, tool.tool_call_id, orjson.dumps(tool.arguments).decode()),
    )
    if (tool.kind, tool.mcp_server) != ("tool", None):
        return f"the listener reads {body!r}, which names an MCP call or server, as a plain call"
    if read != expected:
        return f"{body!r}: the listener reads {read}, Python {expected}"
    return None


@pytest.mark.parametrize("protobuf", [False, True], ids=["json", "protobuf"])
def test_the_listener_reads_generated_guard_calls_as_python_does(protobuf: bool) -> None:
    rng = random.Random(20261205 + protobuf)
    make = protobuf_body if protobuf else json_body
    read_here = 0
    for _ in range(BODIES):
        body = make(rng)
        difference = first_difference(body, protobuf)
        assert difference is None, difference
        read_here += native.guard_call_read(body, protobuf) is not None
    # both sides of the line are exercised: a fair share read here, most left to Python
    assert BODIES * 0.1 < read_here < BODIES * 0.7


def test_a_trace_id_with_a_trailing_newline_is_refused() -> None:
    with pytest.raises(ValidationError):
        GuardRequest.model_validate(
            {"trace_id": TRACE + "\n", "service": "s", "tool": {"name": "t"}}
        )
