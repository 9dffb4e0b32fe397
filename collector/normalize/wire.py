"""One request's wire bytes to an Arrow batch, by the native decoder (`_native`, in Rust).

The Rust extension parses the request (protobuf, or OTLP/JSON with 64-bit integers as strings or
numbers), validates and normalizes every span or log record and builds the store's batch columns
in one pass, with the GIL released: decoding runs on threads of the receiving process. The rows
cross into pyarrow through the Arrow C data interface, without a copy.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pyarrow as pa

from collector.errors import MalformedRequest
from collector.normalize import _native


@dataclass(frozen=True)
class Decoded:
    """The rows as Arrow plus the counts the receiver reports."""

    table: pa.Table | None
    rows: int
    rejected: dict[str, int]
    truncated_rows: int
    # Rejected items by the service.name of their resource; "" where none can be told.
    rejected_by_service: dict[str, int] = field(default_factory=dict)
    # Top-level keys of an OTLP/JSON body that are not the request's (ignored).
    ignored_keys: tuple[str, ...] = ()

    @property
    def rejected_total(self) -> int:
        return sum(self.rejected.values())


def decode_request(signal: str, encoding: str, data: bytes, max_attribute_length: int) -> Decoded:
    """Parse, validate and normalize one export request; raises MalformedRequest on bad bytes.

    `signal` is "traces" or "logs", `encoding` "protobuf" or "json"."""
    try:
        batch, rows, rejected, truncated, by_service, ignored = _native.decode(
            signal, encoding, bytes(data), max_attribute_length
        )
    except ValueError as exc:
        raise MalformedRequest(str(exc)) from None
    table = pa.Table.from_batches([pa.record_batch(batch)]) if batch is not None else None
    return Decoded(table, rows, rejected, truncated, by_service, tuple(ignored))
