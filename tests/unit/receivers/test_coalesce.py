"""Small protobuf exports waiting together are decoded, journaled and loaded as one batch; each
request still gets its own answer, only once the batch is durable."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pytest
from prometheus_client import CollectorRegistry

from collector.config.sections import IngestConfig, LimitsConfig
from collector.config.writer import WriterConfig
from collector.errors import MalformedRequest, Overloaded, ShuttingDown
from collector.lifecycle import deadline_in
from collector.normalize.wire import decode_request
from collector.receivers.coalesce import MOST_FIELDS, Coalescer, whole_fields
from collector.receivers.ingest import ExportReply, Ingest
from collector.receivers.metrics import ReceiverMetrics
from collector.store.database import Database
from collector.store.journal import Journal, read_frames
from collector.store.metrics import StoreMetrics
from collector.store.writer import Writer
from tests.support.otlp import bad_id_request, new_trace_id, simple_spans, trace_request

GRPC = ("traces", "grpc")


def body(spans: int = 3, trace_id: bytes | None = None) -> bytes:
    return trace_request(simple_spans(spans, trace_id or new_trace_id())).SerializeToString()


# A whole field 1 (resource_spans) whose content is not a ResourceSpans message.
GARBAGE_INSIDE = b"\x0a\x04\xff\xff\xff\xff"


def test_whole_fields_tells_a_request_that_ends_at_its_last_byte() -> None:
    good = body()
    assert whole_fields(good)
    assert whole_fields(b"")
    assert whole_fields(GARBAGE_INSIDE)  # framing only: its content is the decoder's to judge
    assert not whole_fields(good[:-1])  # torn: the last field runs past the end
    assert not whole_fields(good + b"\x0a")  # a tag with no length after it
    assert not whole_fields(b"\x00\x01")  # field number 0
    assert not whole_fields(b"\x0b\x0c")  # a group
    assert not whole_fields(b"\xff" * 11)  # a varint longer than 10 bytes
    assert whole_fields(b"\x10\x00" * MOST_FIELDS)
    assert not whole_fields(b"\x10\x00" * (MOST_FIELDS + 1))  # taken alone, not scanned on


def test_a_torn_request_would_swallow_the_next_one_if_joined() -> None:
    """Why torn requests are never joined: the next request's bytes would complete it."""
    torn = b"\x0a\x05\x0a\x03"  # field 1 claims 5 bytes, has 2
    assert not whole_fields(torn)
    assert whole_fields(torn + b"\x0a\x00\x0a")  # joined, it reads as well framed


def test_a_batch_frame_decodes_to_the_rows_of_its_requests_in_order() -> None:
    """What a replay of a batch's journal frame loads: the rows each request alone would."""
    bodies = [body(3), body(1), trace_request(simple_spans(2)).SerializeToString()]
    alone = [decode_request("traces", "protobuf", b, 4096) for b in bodies]
    joined = decode_request("traces", "protobuf", b"".join(bodies), 4096)
    assert joined.rows == sum(d.rows for d in alone) == 6
    assert joined.table is not None
    assert joined.table.equals(pa.concat_tables([d.table for d in alone if d.table is not None]))


@pytest.fixture
def journaled(tmp_path: Path) -> Iterator[Writer]:
    database = Database(tmp_path / "a.duckdb")
    database.open()
    journal = Journal(tmp_path / "journal", 1024 * 1024)
    writer = Writer(database, WriterConfig(), StoreMetrics(CollectorRegistry()), journal=journal)
    writer.start()
    yield writer
    writer.shutdown(deadline_in(5))
    database.close()


def make_ingest(writer: Writer, registry: CollectorRegistry, **config: int) -> Ingest:
    ingest = Ingest(writer, IngestConfig(**config), LimitsConfig(), ReceiverMetrics(registry))
    ingest.start()
    return ingest


def frames(writer: Writer) -> list[bytes]:
    assert writer.journal is not None
    directory = writer.journal.directory
    return [f.payload for path in sorted(directory.glob("*.journal")) for f in read_frames(path)[0]]


def stored(writer: Writer, trace_id: bytes) -> int:
    writer.settled().result(10)
    cursor = writer.database.cursor()
    row = cursor.execute("SELECT count(*) FROM spans WHERE trace_id = ?", [trace_id.hex()])
    return int(row.fetchone()[0])


async def together(ingest: Ingest, bodies: list[bytes], protocol: str = "grpc") -> list:
    """Send every body at the same moment; each one's reply or error."""
    sends = [ingest.consume("traces", "protobuf", b, protocol) for b in bodies]
    return await asyncio.gather(*sends, return_exceptions=True)


def test_requests_waiting_together_are_one_journal_frame(journaled: Writer) -> None:
    registry = CollectorRegistry()
    ingest = make_ingest(journaled, registry)
    ids = [new_trace_id() for _ in range(6)]
    bodies = [body(3, trace_id) for trace_id in ids]

    async def send() -> list:
        first = asyncio.ensure_future(ingest.consume("traces", "protobuf", bodies[0], "grpc"))
        await asyncio.sleep(0)  # the first goes alone: nothing else waits yet
        return [await first, *await together(ingest, bodies[1:])]

    replies = asyncio.run(send())
    assert replies == [ExportReply()] * 6
    assert frames(journaled) == [bodies[0], b"".join(bodies[1:])]
    assert [stored(journaled, trace_id) for trace_id in ids] == [3] * 6
    accepted = {"protocol": "grpc", "signal": "traces"}
    assert registry.get_sample_value("sextant_receiver_items_accepted_total", accepted) == 18
    assert registry.get_sample_value("sextant_receiver_batch_requests_count", accepted) == 2
    assert registry.get_sample_value("sextant_receiver_batch_requests_sum", accepted) == 6


def test_a_request_with_something_to_be_told_takes_every_request_of_its_batch_alone(
    journaled: Writer,
) -> None:
    registry = CollectorRegistry()
    ingest = make_ingest(journaled, registry)
    good_id, mixed_id = new_trace_id(), new_trace_id()
    bodies = [body(4, good_id), bad_id_request(mixed_id).SerializeToString(), GARBAGE_INSIDE]

    replies = asyncio.run(together(ingest, bodies))

    assert replies[0] == ExportReply()
    assert replies[1].rejected == 5
    assert "rejected 5 spans" in replies[1].message
    assert isinstance(replies[2], MalformedRequest)
    assert stored(journaled, good_id) == 4
    assert stored(journaled, mixed_id) == 3
    assert sorted(frames(journaled)) == sorted(bodies[:2])  # the malformed one never journaled
    traces = {"protocol": "grpc", "signal": "traces"}
    assert registry.get_sample_value("sextant_receiver_items_received_total", traces) == 12
    assert registry.get_sample_value("sextant_receiver_items_accepted_total", traces) == 7
    invalid = {**traces, "reason": "invalid_span_id"}
    assert registry.get_sample_value("sextant_receiver_items_rejected_total", invalid) == 2


def test_a_torn_request_is_refused_alone_and_its_neighbour_stored_whole(
    journaled: Writer,
) -> None:
    ingest = make_ingest(journaled, CollectorRegistry())
    trace_id = new_trace_id()
    good = body(5, trace_id)
    torn = body(2)[:-3]
    replies = asyncio.run(together(ingest, [torn, good, body(1)]))
    assert isinstance(replies[0], MalformedRequest)
    assert replies[1:] == [ExportReply()] * 2
    assert stored(journaled, trace_id) == 5


def test_a_batch_the_queue_has_no_room_for_refuses_only_whom_it_would_refuse_alone(
    tmp_path: Path,
) -> None:
    database = Database(tmp_path / "a.duckdb")
    database.open()
    writer = Writer(database, WriterConfig(max_queue_rows=10), StoreMetrics(CollectorRegistry()))
    waiting = decode_request("traces", "protobuf", body(5), 4096).table
    assert waiting is not None
    writer.submit("spans", waiting)  # 5 rows queued; the writer not started yet
    ingest = make_ingest(writer, CollectorRegistry())
    small_id = new_trace_id()

    async def send() -> list:
        sends = [
            ingest.consume("traces", "protobuf", b, "grpc") for b in (body(1, small_id), body(8))
        ]
        replies = asyncio.gather(*sends, return_exceptions=True)
        await asyncio.sleep(0.05)  # both queued or refused by now; the commit lets them answer
        writer.start()
        return await replies

    try:
        small, large = asyncio.run(send())  # alone: 5 + 1 fits, 6 + 8 does not
        assert small == ExportReply()
        assert isinstance(large, Overloaded)
        assert stored(writer, small_id) == 1
    finally:
        writer.shutdown(deadline_in(5))
        database.close()


def test_requests_of_coalesce_bytes_or_more_share_the_journals_appends_as_alone(
    tmp_path: Path,
) -> None:
    """Taken alone at once, not one after another behind a batch of one."""

    def appends(coalesce_bytes: int) -> int:
        directory = tmp_path / str(coalesce_bytes)
        database = Database(directory / "a.duckdb")
        database.open()
        journal = Journal(directory / "journal", 1024 * 1024)
        calls = []
        append = journal.append

        def slow(requests: list) -> object:
            calls.append(len(requests))
            threading.Event().wait(0.005)  # a slow disk's fsync
            return append(requests)

        journal.append = slow  # type: ignore[method-assign]
        writer = Writer(
            database, WriterConfig(), StoreMetrics(CollectorRegistry()), journal=journal
        )
        writer.start()
        ingest = make_ingest(writer, CollectorRegistry(), coalesce_bytes=coalesce_bytes)
        try:
            replies = asyncio.run(together(ingest, [body() for _ in range(40)]))
            assert replies == [ExportReply()] * 40
        finally:
            writer.shutdown(deadline_in(5))
            database.close()
        return len(calls)

    assert appends(10) <= 2 * appends(0) < 40


def test_protocols_and_json_are_never_joined(journaled: Writer) -> None:
    ingest = make_ingest(journaled, CollectorRegistry())
    grpc_body, http_body = body(), body()
    asyncio.run(together(ingest, [grpc_body, http_body], "grpc"))  # warm: both in one batch
    journaled.settled().result(10)
    before = len(frames(journaled))

    async def send() -> None:
        await asyncio.gather(
            ingest.consume("traces", "protobuf", grpc_body, "grpc"),
            ingest.consume("traces", "protobuf", http_body, "http"),
        )

    asyncio.run(send())
    assert len(frames(journaled)) == before + 2


def test_off_takes_each_request_alone(journaled: Writer) -> None:
    ingest = make_ingest(journaled, CollectorRegistry(), coalesce_bytes=0)
    bodies = [body() for _ in range(4)]
    asyncio.run(together(ingest, bodies))
    assert sorted(frames(journaled)) == sorted(bodies)


def test_a_batch_is_no_larger_than_coalesce_bytes(journaled: Writer) -> None:
    bodies = [body() for _ in range(5)]
    limit = len(bodies[0]) * 2
    ingest = make_ingest(journaled, CollectorRegistry(), coalesce_bytes=limit)
    asyncio.run(together(ingest, bodies))
    assert all(len(frame) <= limit for frame in frames(journaled))
    assert b"".join(frames(journaled)) == b"".join(bodies)


def test_requests_wait_for_the_batch_on_its_way_and_go_together_after_it() -> None:
    """At most one batch of a key in flight: what arrives meanwhile waits, then goes as one."""
    batches: list[list[bytes]] = []

    async def scenario() -> list[str]:
        gate = asyncio.Event()

        async def flush(key: tuple[str, str], bodies: list[bytes]) -> list[str | BaseException]:
            batches.append(bodies)
            await gate.wait()
            return [b.decode() for b in bodies]

        coalescer: Coalescer[str] = Coalescer(flush, max_bytes=1024)
        first = asyncio.ensure_future(coalescer.submit(GRPC, b"a"))
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        later = [asyncio.ensure_future(coalescer.submit(GRPC, x)) for x in (b"b", b"c", b"d")]
        await asyncio.sleep(0)
        assert coalescer.waiting(GRPC) == 3  # waiting for "a" to be done
        assert batches == [[b"a"]]
        gate.set()
        return [await first, *[await f for f in later]]

    assert asyncio.run(scenario()) == ["a", "b", "c", "d"]
    assert batches == [[b"a"], [b"b", b"c", b"d"]]


def test_a_batch_refused_is_each_requests_answer_and_the_next_batch_goes_on() -> None:
    calls = []

    async def flush(key: tuple[str, str], bodies: list[bytes]) -> list[str | BaseException]:
        calls.append(bodies)
        if len(calls) == 1:
            raise ShuttingDown("shutting down")
        return ["ok"] * len(bodies)

    async def scenario() -> list:
        coalescer: Coalescer[str] = Coalescer(flush, max_bytes=1024)
        sends = [coalescer.submit(GRPC, x) for x in (b"a", b"b")]
        refused = await asyncio.gather(*sends, return_exceptions=True)
        return [*refused, await coalescer.submit(GRPC, b"c")]

    refused_a, refused_b, later = asyncio.run(scenario())
    assert isinstance(refused_a, ShuttingDown) and isinstance(refused_b, ShuttingDown)
    assert later == "ok"


def test_a_client_that_gave_up_before_its_batch_started_is_left_out() -> None:
    seen: list[list[bytes]] = []

    async def flush(key: tuple[str, str], bodies: list[bytes]) -> list[str | BaseException]:
        seen.append(bodies)
        return ["ok"] * len(bodies)

    async def scenario() -> str:
        coalescer: Coalescer[str] = Coalescer(flush, max_bytes=1024)
        gone = asyncio.ensure_future(coalescer.submit(GRPC, b"gone"))
        kept = asyncio.ensure_future(coalescer.submit(GRPC, b"kept"))
        await asyncio.sleep(0)  # both queued, the batch scheduled
        gone.cancel()
        return await kept

    assert asyncio.run(scenario()) == "ok"
    assert seen == [[b"kept"]]


def test_answers_wait_for_the_journal_fsync(journaled: Writer) -> None:
    """No request of a batch is answered before the batch's frame is on disk."""
    assert journaled.journal is not None
    journal = journaled.journal
    original = journal.append
    entered, release = threading.Event(), threading.Event()

    def held(requests: list) -> list[int]:
        entered.set()
        release.wait(10)
        return original(requests)

    journal.append = held  # type: ignore[method-assign]
    ingest = make_ingest(journaled, CollectorRegistry())

    async def scenario() -> list:
        sends = asyncio.ensure_future(together(ingest, [body(), body()]))
        loop = asyncio.get_running_loop()
        assert await loop.run_in_executor(None, entered.wait, 10)
        await asyncio.sleep(0.05)
        assert not sends.done()  # held in the append: nothing answered
        release.set()
        return await sends

    assert asyncio.run(scenario()) == [ExportReply()] * 2
