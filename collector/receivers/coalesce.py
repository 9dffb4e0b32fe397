"""Small export requests that arrive together are decoded, journaled and loaded as one.

A 10-span request costs the receiver a fixed amount whatever it holds: the decoder's call and the
import of its Arrow columns (about 70 µs of the 90 a decode of 10 spans takes), a journal frame
and its share of an fsync, a future handed between threads, a table the writer concatenates.
Two serialized protobuf export requests placed end to end are one valid request holding both
(protobuf merges a message's repeated fields), so the requests waiting at one moment are
decoded as one body, appended to the journal as one frame and queued as one batch of rows.

Each request is still answered on its own, and only once the batch is durable, as it would have
been alone. Any request whose answer would say something of its own falls back to being taken
alone: one that is not a whole sequence of top-level protobuf fields (checked before joining,
so a torn request can never swallow the next one's bytes), and every request of a batch whose
decode fails or rejects or truncates anything (so each request gets its own status and its own
partial success). A batch the write queue has no room for is taken request by request too (so
only those that would have been refused alone are). A refusal of the batch (shutting down, the
journal failing) is the answer of each of its requests, as it would have been.

While a batch is on its way to the journal, the requests that arrive meanwhile wait for it to be
durable and then go together: the more load, the larger the batches and the fewer the fsyncs.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

Key = tuple[str, str]  # (signal, protocol): batches never mix them
Reply = TypeVar("Reply")

# Wire types of a protobuf field: varint, 64-bit, length-delimited, 32-bit (groups: not taken).
VARINT, I64, LEN, I32 = 0, 1, 2, 5
FIXED = {I64: 8, I32: 4}
MOST_FIELDS = 256  # top-level fields (resources) scanned before a request is taken alone


def _varint(data: bytes, at: int) -> tuple[int, int]:
    """The varint at `at` and the offset after it; raises IndexError or ValueError if torn."""
    value = shift = 0
    while True:
        byte = data[at]
        at += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, at
        shift += 7
        if shift > 63:
            raise ValueError("varint longer than 10 bytes")


def whole_fields(data: bytes, most: int = MOST_FIELDS) -> bool:
    """Whether `data` is a sequence of at most `most` complete top-level protobuf fields ending
    at its last byte: then its bytes cannot run on into those of a request placed after it.
    An export request's top-level fields are its resources, a few; a body of thousands of tiny
    fields is taken alone rather than scanned here, on the event loop."""
    ends = field_ends(data, most)
    return ends is not None and (not ends or ends[-1] == len(data))


def split_fields(data: bytes) -> list[bytes] | None:
    """Each top-level field of `data` (a resource, for an export request) as bytes of its own,
    each a valid request alone; None when `data` is not whole fields."""
    ends = field_ends(data, len(data))
    if ends is None or (ends and ends[-1] != len(data)):
        return None
    return [data[start:end] for start, end in zip([0, *ends], ends, strict=False)]


def field_ends(data: bytes, most: int) -> list[int] | None:
    """Where each of the first `most` top-level protobuf fields of `data` ends (the rest not
    scanned); None when one is torn, of field number 0 or a group."""
    at, end = 0, len(data)
    ends: list[int] = []
    try:
        while at < end and len(ends) <= most:
            tag, at = _varint(data, at)
            wire, field = tag & 7, tag >> 3
            if field == 0:
                return None
            if wire == VARINT:
                _, at = _varint(data, at)
            elif wire == LEN:
                length, at = _varint(data, at)
                at += length
            elif wire in FIXED:
                at += FIXED[wire]
            else:
                return None
            ends.append(at)
    except (IndexError, ValueError):
        return None
    return ends if len(ends) <= most else None


@dataclass
class _Waiting(Generic[Reply]):
    data: bytes
    reply: asyncio.Future[Reply]


# Takes the requests of one batch (at least one) and returns one answer or error each, in order.
Flush = Callable[[Key, list[bytes]], Awaitable[list["Reply | BaseException"]]]


class Coalescer(Generic[Reply]):
    """Queues requests by key and hands them to `flush` in batches of at most `max_bytes`
    (a larger request goes alone), at most `in_flight` batches of a key at a time. Used from
    the event loop only."""

    def __init__(self, flush: Flush[Reply], max_bytes: int, in_flight: int = 1) -> None:
        self.flush = flush
        self.max_bytes = max_bytes
        self.in_flight = in_flight
        self._queues: dict[Key, deque[_Waiting[Reply]]] = {}
        self._running: dict[Key, int] = {}
        self._scheduled: set[Key] = set()
        self._tasks: set[asyncio.Task[None]] = set()

    def waiting(self, key: Key) -> int:
        """Requests of `key` queued for a batch that has not started."""
        return len(self._queues.get(key, ()))

    async def submit(self, key: Key, data: bytes) -> Reply:
        """The request's answer once its batch is done; raises what its batch raised for it."""
        reply: asyncio.Future[Reply] = asyncio.get_running_loop().create_future()
        self._queues.setdefault(key, deque()).append(_Waiting(data, reply))
        self._kick(key)
        return await reply

    def _kick(self, key: Key) -> None:
        """Start the key's next batch soon, if it may start: scheduled rather than at once, so
        the requests the event loop is about to run join it."""
        if (
            key in self._scheduled
            or not self._queues.get(key)
            or self._running.get(key, 0) >= self.in_flight
        ):
            return
        self._scheduled.add(key)
        asyncio.get_running_loop().call_soon(self._start, key)

    def _start(self, key: Key) -> None:
        self._scheduled.discard(key)
        queue = self._queues[key]
        taken: list[_Waiting[Reply]] = []
        size = 0
        while queue and (not taken or size + len(queue[0].data) <= self.max_bytes):
            waiting = queue.popleft()
            if waiting.reply.done():  # its client gave up before anything was done with it
                continue
            taken.append(waiting)
            size += len(waiting.data)
        if not taken:
            return
        self._running[key] = self._running.get(key, 0) + 1
        task = asyncio.get_running_loop().create_task(self._run(key, taken))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _run(self, key: Key, taken: list[_Waiting[Reply]]) -> None:
        outcomes: list[Reply | BaseException] | None = None
        try:
            outcomes = await self.flush(key, [w.data for w in taken])
        except Exception as exc:  # every request of the batch is told
            outcomes = [exc] * len(taken)
        finally:
            self._running[key] -= 1
            self._kick(key)
            for index, waiting in enumerate(taken):
                if outcomes is None:  # the batch itself was cancelled (shutdown)
                    waiting.reply.cancel()
                else:
                    _answer(waiting.reply, outcomes[index])


def _answer(reply: asyncio.Future[Reply], outcome: Reply | BaseException) -> None:
    if reply.done():
        return
    if isinstance(outcome, asyncio.CancelledError):
        reply.cancel()
    elif isinstance(outcome, BaseException):
        reply.set_exception(outcome)
    else:
        reply.set_result(outcome)
