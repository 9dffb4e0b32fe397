"""The native decoder against the reference: the Python decoder it replaced, on protobuf's own
parse of the request (tests/support/reference). Same acceptance, same counts, every column."""

from __future__ import annotations

from typing import Any

import orjson

from collector.errors import MalformedRequest
from collector.normalize.wire import Decoded, decode_request
from tests.support.reference.wire import decode_request as reference_decode

# Columns holding JSON text: equal when they hold the same value (float spellings may differ).
JSON_COLUMNS = frozenset(
    ("resource_attributes", "scope_attributes", "attributes", "events", "links", "body")
)
COUNTS = ("rows", "rejected", "truncated_rows", "rejected_by_service", "ignored_keys")


def outcome(decode: Any, signal: str, encoding: str, data: bytes, limit: int) -> Decoded | str:
    """The decoded request, or the message it was refused with."""
    try:
        return decode(signal, encoding, data, limit)
    except MalformedRequest as exc:
        return str(exc)


def same(column: str, native: Any, reference: Any) -> bool:
    if native == reference:
        return True
    if column not in JSON_COLUMNS or not (isinstance(native, str) and isinstance(reference, str)):
        return False
    try:
        return bool(orjson.loads(native) == orjson.loads(reference))
    except orjson.JSONDecodeError:
        return False


def rows(decoded: Decoded) -> list[dict[str, Any]]:
    return decoded.table.to_pylist() if decoded.table is not None else []


def differences(signal: str, encoding: str, data: bytes, limit: int) -> list[str]:
    """What the two decoders disagree on for one request; [] when they agree."""
    native = outcome(decode_request, signal, encoding, data, limit)
    reference = outcome(reference_decode, signal, encoding, data, limit)
    if isinstance(native, str) or isinstance(reference, str):
        if isinstance(native, str) and isinstance(reference, str):
            # protobuf's and prost's wording differ; OTLP/JSON's messages are ours: equal.
            if encoding == "protobuf" or native == reference:
                return []
            if native.startswith("request body is not valid JSON") and reference.startswith(
                "request body is not valid JSON"
            ):
                return []
        return [f"native: {native!r:.300}\nreference: {reference!r:.300}"]
    found = [
        f"{name}: native {getattr(native, name)!r} reference {getattr(reference, name)!r}"
        for name in COUNTS
        if getattr(native, name) != getattr(reference, name)
    ]
    both = native.table is not None and reference.table is not None
    if both and native.table.schema != reference.table.schema:
        found.append(f"schema: {native.table.schema} vs {reference.table.schema}")
    for i, (mine, theirs) in enumerate(zip(rows(native), rows(reference), strict=False)):
        found.extend(
            f"row {i} {column}: native {mine[column]!r:.200} reference {theirs.get(column)!r:.200}"
            for column in mine
            if not same(column, mine[column], theirs.get(column))
        )
    return found
