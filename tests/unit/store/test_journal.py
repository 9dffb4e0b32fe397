"""The ingest journal: acks after fsync, loads behind them, replay after a crash, torn tails."""

from __future__ import annotations

import concurrent.futures
from pathlib import Path

import duckdb
import pytest
from prometheus_client import CollectorRegistry

from collector.config.writer import WriterConfig
from collector.errors import StoreUnavailable
from collector.lifecycle import deadline_in
from collector.normalize.wire import decode_request
from collector.store.database import Database
from collector.store.journal import Frame, Journal, read_frames
from collector.store.metrics import StoreMetrics
from collector.store.writer import Writer
from tests.support.otlp import new_trace_id, simple_spans, trace_request

LIMIT = 1000


def request(spans: int, trace_id: bytes | None = None) -> tuple[str, str, int, bytes]:
    body = trace_request(simple_spans(spans, trace_id or new_trace_id())).SerializeToString()
    return ("traces", "protobuf", LIMIT, body)


def decode(frame: Frame):  # type: ignore[no-untyped-def]
    return decode_request(
        frame.signal, frame.encoding, frame.payload, frame.max_attribute_length
    ).table


def open_writer(tmp_path: Path, **config: object) -> tuple[Database, Writer, CollectorRegistry]:
    database = Database(tmp_path / "s.duckdb")
    database.open()
    registry = CollectorRegistry()
    journal = Journal(tmp_path / "journal", 1024 * 1024)
    writer = Writer(database, WriterConfig(**config), StoreMetrics(registry), journal=journal)
    writer.start()
    return database, writer, registry


def submit(writer: Writer, req: tuple[str, str, int, bytes]) -> concurrent.futures.Future[None]:
    return writer.submit("spans", decode_request("traces", "protobuf", req[3], LIMIT).table, req)


def stored(database: Database) -> dict[str, int]:
    rows = database.cursor().execute("SELECT trace_id, count(*) FROM spans GROUP BY 1")
    return dict(rows.fetchall())


def test_frames_survive_a_reopen_and_a_torn_tail_is_cut(tmp_path: Path) -> None:
    journal = Journal(tmp_path, 1024 * 1024)
    assert list(journal.open(0)) == []
    first = journal.append([request(2), request(3)])
    second = journal.append([request(1)])
    assert (first, second) == ([1, 2], [3])
    journal.close()
    segment = sorted(tmp_path.glob("*.journal"))[-1]
    whole = segment.stat().st_size
    with segment.open("ab") as f:  # a crash in the middle of the next append
        f.write(b"SXJ1 half a header")

    reopened = Journal(tmp_path, 1024 * 1024)
    frames = list(reopened.open(applied=1))
    assert [f.seq for f in frames] == [2, 3]  # frame 1 was loaded before the crash
    assert segment.stat().st_size == whole  # the torn append is gone
    assert reopened.append([request(1)]) == [4]  # numbering goes on after the last frame


def test_a_frame_whose_bytes_changed_is_not_replayed(tmp_path: Path) -> None:
    journal = Journal(tmp_path, 1024 * 1024)
    list(journal.open(0))
    journal.append([request(2), request(2)])
    journal.close()
    segment = next(tmp_path.glob("*.journal"))
    data = bytearray(segment.read_bytes())
    data[-5] ^= 0xFF  # inside the second frame's payload
    segment.write_bytes(bytes(data))
    frames, _, stopped = read_frames(segment)
    assert [f.seq for f in frames] == [1]
    assert stopped == "a frame whose checksum does not match"


def test_loaded_segments_are_removed(tmp_path: Path) -> None:
    journal = Journal(tmp_path, segment_bytes=1)  # every append starts a new segment
    list(journal.open(0))
    for _ in range(4):
        journal.append([request(1)])
    assert len(list(tmp_path.glob("*.journal"))) == 4
    journal.release(applied=2)
    names = sorted(p.name for p in tmp_path.glob("*.journal"))
    assert [int(n.split(".")[0]) for n in names] == [3, 4]
    journal.release(applied=4)  # the one being written stays
    assert len(list(tmp_path.glob("*.journal"))) == 1


def test_acknowledged_requests_are_loaded_and_a_read_after_the_ack_sees_them(
    tmp_path: Path,
) -> None:
    database, writer, registry = open_writer(tmp_path, load_linger_seconds=0.5)
    try:
        trace_id = new_trace_id()
        submit(writer, request(4, trace_id)).result(5)  # the ack: journaled, maybe not loaded
        writer.settled().result(5)
        assert stored(database) == {trace_id.hex(): 4}
        applied = database.cursor().execute("SELECT applied_seq FROM journal_state").fetchone()
        assert applied == (1,)
        assert registry.get_sample_value("sextant_store_journal_sync_duration_seconds_count") == 1
    finally:
        writer.shutdown(deadline_in(5))
        database.close()


def test_a_span_sent_twice_is_stored_once_by_the_first_load_without_a_failed_commit(
    tmp_path: Path,
) -> None:
    """The journal is opened by reading the store: that read must leave the loads' connection
    free for their first commit, which asks the store about the span seen twice."""
    database, writer, registry = open_writer(tmp_path)
    try:
        again = request(3)
        for future in [submit(writer, again), submit(writer, again)]:
            future.result(5)
        writer.settled().result(5)
        assert sum(stored(database).values()) == 3
        assert registry.get_sample_value("sextant_store_commit_errors_total") == 0
    finally:
        writer.shutdown(deadline_in(5))
        database.close()


def test_requests_acknowledged_but_not_loaded_are_loaded_at_the_next_start(
    tmp_path: Path,
) -> None:
    # What a run killed after its acks and before its load leaves: frames past applied_seq.
    database = Database(tmp_path / "s.duckdb")
    database.open()
    database.close()
    crashed = Journal(tmp_path / "journal", 1024 * 1024)
    list(crashed.open(0))
    traces = [new_trace_id() for _ in range(3)]
    crashed.append([request(5, t) for t in traces])
    crashed.close()

    database, writer, registry = open_writer(tmp_path)
    try:
        assert writer.replay(decode) == 15
        assert stored(database) == {t.hex(): 5 for t in traces}
        assert registry.get_sample_value("sextant_store_journal_replayed_requests_total") == 3
    finally:
        writer.shutdown(deadline_in(5))
        database.close()
    database, writer, _ = open_writer(tmp_path)  # and only once
    try:
        assert writer.replay(decode) == 0
        assert sum(stored(database).values()) == 15
    finally:
        writer.shutdown(deadline_in(5))
        database.close()


def test_a_failed_load_of_acknowledged_rows_is_retried_and_new_requests_are_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    database, writer, registry = open_writer(tmp_path, load_linger_seconds=0)
    write = writer.committer.write
    failures = [duckdb.IOException("IO Error: No space left on device")] * 3
    refused: list[Exception] = []
    accepted: list[bytes] = []

    def flaky(*args: object) -> dict[str, int]:
        if failures:
            exc = failures.pop()
            trace_id = new_trace_id()
            try:  # while the load is failing, a new export is refused, not acknowledged
                submit(writer, request(1, trace_id))
                accepted.append(trace_id)
            except StoreUnavailable as e:
                refused.append(e)
            raise exc
        return write(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(writer.committer, "write", flaky)
    try:
        trace_id = new_trace_id()
        submit(writer, request(3, trace_id)).result(5)  # acknowledged before the failures
        writer.settled().result(10)
        # the export sent during the first failure came before the queue was held
        assert len(accepted) == 1 and len(refused) == 2
        assert stored(database) == {trace_id.hex(): 3, accepted[0].hex(): 1}
        assert "No space left on device" in str(refused[0])
        assert registry.get_sample_value("sextant_store_commit_errors_total") == 3
        assert writer.failing == ""
    finally:
        writer.shutdown(deadline_in(5))
        database.close()
