"""The SQL endpoint's answers, encoded batch by batch as the rows stream in: JSON, an Arrow IPC
stream or CSV (the console's download), each counting its own bytes so the byte limit holds for
what is sent, and sent in slices (`streamed`).

An answer is built in a worker thread; the event loop that sends it also answers OTLP exports.
Handed a 64 MiB body at once, that loop would copy it into the socket's buffer and then shift
the rest of the buffer after every send (Python 3.11's asyncio), for a second or more in all:
sent a slice at a time, each waiting for the socket to drain, it stays free between slices."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import Any

import orjson
import pyarrow as pa
from aiohttp import web

from collector.spreadsheet import csv_cell, csv_text, defused, json_default
from collector.store.readonly import QueryOutcome, rows_within

JSON_OPTIONS = orjson.OPT_NAIVE_UTC | orjson.OPT_UTC_Z
SLICE_BYTES = 256 * 1024


def streamed(
    parts: Sequence[bytes | memoryview],
    content_type: str,
    headers: dict[str, str] | None = None,
    charset: str | None = None,
) -> web.Response:
    """A reply whose body, `parts` joined, is written a slice at a time."""
    views = [memoryview(p).cast("B") for p in parts]

    async def slices() -> AsyncIterator[memoryview]:
        for view in views:
            for start in range(0, len(view), SLICE_BYTES):
                yield view[start : start + SLICE_BYTES]

    length = sum(len(v) for v in views)
    reply = web.Response(
        body=slices(),
        headers={**(headers or {}), "Content-Length": str(length)},
        content_type=content_type,
        charset=charset,
    )
    return reply


def dumps(value: Any) -> bytes:
    return orjson.dumps(value, default=json_default, option=JSON_OPTIONS)


class JsonAnswer:
    """`{"columns", "rows", "row_count", "truncated", ...}`, the rows encoded a batch at a time."""

    def __init__(self) -> None:
        self.size = 0
        self.columns: list[dict[str, str]] = []
        self.parts: list[bytes] = []

    def start(self, schema: pa.Schema) -> None:
        self.columns = [{"name": f.name, "type": str(f.type)} for f in schema]
        self.size = len(dumps(self.columns)) + 512  # the envelope: counts, flags and the note

    def write(self, batch: pa.RecordBatch, room: int) -> int:
        # JSON is rarely smaller than Arrow: twice the rows that fit as Arrow is enough to try.
        batch = batch.slice(0, min(batch.num_rows, 2 * rows_within(batch, room) + 1))
        rows = list(zip(*(column.to_pylist() for column in batch.columns), strict=True))
        encoded = dumps(rows)[1:-1]  # the rows without the list's brackets
        if len(encoded) + 1 <= room:
            self._add(encoded)
            return len(rows)
        taken = 0
        for row in rows:  # the batch does not fit whole: as many rows as do
            encoded = dumps(row)
            if len(encoded) + 1 > room:
                break
            room -= len(encoded) + 1
            self._add(encoded)
            taken += 1
        return taken

    def _add(self, encoded: bytes) -> None:
        self.parts.append(b"," + encoded if self.parts else encoded)
        self.size += len(encoded) + 1

    def parts_of_body(self, outcome: QueryOutcome, note: str | None) -> list[bytes]:
        """The body in the parts it was built in (not joined into one more copy)."""
        tail = {
            "row_count": outcome.rows,
            "truncated": outcome.truncated,
            "truncated_by": outcome.truncated_by,
            "note": note,
            "elapsed_ms": round(outcome.elapsed_seconds * 1000, 3),
        }
        head = b'{"columns":' + dumps(self.columns) + b',"rows":['
        parts, self.parts = self.parts, []
        return [head, *parts, b"],", dumps(tail)[1:]]


class ArrowAnswer:
    """An Arrow IPC stream, written as the batches come."""

    def __init__(self) -> None:
        self.sink = pa.BufferOutputStream()
        self.writer = pa.ipc.new_stream(self.sink, pa.schema([]))

    @property
    def size(self) -> int:
        return self.sink.tell()

    def start(self, schema: pa.Schema) -> None:
        self.sink = pa.BufferOutputStream()
        self.writer = pa.ipc.new_stream(self.sink, schema)

    def write(self, batch: pa.RecordBatch, room: int) -> int:
        batch = batch.slice(0, rows_within(batch, room))
        if batch.num_rows:
            self.writer.write_batch(batch)
        return batch.num_rows

    def body(self) -> memoryview:
        """The stream, without copying it out of Arrow's buffer."""
        self.writer.close()
        return memoryview(self.sink.getvalue())


class CsvAnswer:
    """CSV with a header row, encoded a batch at a time and counted like the JSON answer."""

    def __init__(self) -> None:
        self.size = 0
        self.parts: list[bytes] = []

    def start(self, schema: pa.Schema) -> None:
        self.parts = [self._encode([[defused(name) for name in schema.names]])]
        self.size = len(self.parts[0])

    def write(self, batch: pa.RecordBatch, room: int) -> int:
        batch = batch.slice(0, min(batch.num_rows, 2 * rows_within(batch, room) + 1))
        rows = [
            [csv_cell(v) for v in row]
            for row in zip(*(column.to_pylist() for column in batch.columns), strict=True)
        ]
        encoded = self._encode(rows)
        if len(encoded) <= room:
            self._add(encoded)
            return len(rows)
        taken = 0
        for row in rows:  # the batch does not fit whole: as many rows as do
            encoded = self._encode([row])
            if len(encoded) > room:
                break
            room -= len(encoded)
            self._add(encoded)
            taken += 1
        return taken

    def _add(self, encoded: bytes) -> None:
        self.parts.append(encoded)
        self.size += len(encoded)

    @staticmethod
    def _encode(rows: list[list[Any]]) -> bytes:
        return csv_text(rows).encode()
