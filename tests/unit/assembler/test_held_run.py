"""A run's rows out of the held batches, as the runtime guard reads them: each span once, the
same rows whether the batch is read whole (small) or by its index (large)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import pyarrow as pa
import pytest

from collector.assembler.held import WHOLE_BATCH_ROWS, HeldRuns, HeldSpans
from collector.assembler.spans import SPAN_FIELDS

AT = datetime(2026, 12, 2, 12, 0)


def batch(spans: list[tuple[str, str]]) -> pa.Table:
    """(trace id, span id) pairs as span columns (the others null)."""
    columns = {name: [None] * len(spans) for name in SPAN_FIELDS}
    columns["trace_id"] = [t for t, _ in spans]
    columns["span_id"] = [s for _, s in spans]
    types = {"trace_id": pa.string(), "span_id": pa.string()}
    return pa.table({k: pa.array(v, types.get(k, pa.string())) for k, v in columns.items()})


def read(runs: HeldRuns, held: HeldSpans, trace_id: str, trace: object, batch_ids: list[int]):
    """The run as `held_run` reads it: the batches not read yet, added to what was."""
    run, start, unread = runs.unread(trace_id, trace, batch_ids)
    parts = held.held(unread)
    assert parts is not None
    return runs.read(trace_id, run, start, parts)


def read_whole(held: HeldSpans, trace_id: str, batch_ids: list[int]) -> list[dict[str, Any]]:
    """The run read from all its batches, nothing kept from an earlier call."""
    return read(HeldRuns(), held, trace_id, object(), batch_ids).as_list()


@pytest.mark.parametrize("size", [4, WHOLE_BATCH_ROWS * 3])
def test_a_runs_rows_are_each_span_once_from_every_batch(size: int) -> None:
    held = HeldSpans(1 << 30)
    others = [(f"{i:032x}", f"{i:016x}") for i in range(size)]
    first = held.add(batch([*others, ("a" * 32, "1" * 16)]), AT, ["a" * 32])
    # a retried export: the same span again, and one more
    second = held.add(batch([("a" * 32, "1" * 16), ("a" * 32, "2" * 16)]), AT, ["a" * 32])
    for _ in range(2):  # the second read is from what the first kept
        rows = read_whole(held, "a" * 32, [first, second])
        assert [r["span_id"] for r in rows] == ["1" * 16, "2" * 16]
    assert read_whole(held, "b" * 32, [first, second]) == []


def test_a_large_batch_asked_about_many_runs_gives_each_its_own_rows_throughout() -> None:
    """Runs asked one by one, then (once that costs as much) the batch read whole: the rows
    each run gets are the same either way, in the batch's order."""
    traces = [f"{i:032x}" for i in range(WHOLE_BATCH_ROWS * 2)]
    spans = [(t, f"{i:08x}{n:08x}") for n in range(2) for i, t in enumerate(traces)]
    held = HeldSpans(1 << 30)
    batch_id = held.add(batch(spans), AT, traces)
    for i, trace in enumerate(traces):
        rows = read_whole(held, trace, [batch_id])
        assert [r["span_id"] for r in rows] == [f"{i:08x}{n:08x}" for n in range(2)]
        assert all(r["trace_id"] == trace for r in rows)
    assert read_whole(held, "b" * 32, [batch_id]) == []


def test_a_runs_rows_read_one_by_one_are_the_rows_the_store_gives() -> None:
    """Every column's value, nulls and integers included, across the batch's chunks: a row
    read alone out of a large batch is the row the whole batch gives."""
    traces = [f"{i:032x}" for i in range(WHOLE_BATCH_ROWS * 2)]
    chunks = []
    for n in range(3):
        table = batch([(t, f"{i:08x}{n:08x}") for i, t in enumerate(traces)])
        ends = pa.array([i * 1000 + n if i % 3 else None for i in range(len(traces))], pa.int64())
        chunks.append(table.set_column(8, "end_time_unix_nano", ends))
    table = pa.concat_tables(chunks)
    assert table.column("trace_id").num_chunks == 3
    expected = table.to_pylist()
    held = HeldSpans(1 << 30)
    batch_id = held.add(table, AT, traces)
    for trace in traces[:5]:
        rows = read_whole(held, trace, [batch_id])
        assert rows == [r for r in expected if r["trace_id"] == trace]


def test_a_run_asked_again_reads_only_its_new_batches_and_gives_the_same_rows() -> None:
    """The guard's own steps arrive batch after batch: each call reads the batches that came
    since the last one, and the run is the one every batch read again would give; the rows
    handed out earlier stay as they were."""
    held, runs = HeldSpans(1 << 30), HeldRuns()
    run, trace = "a" * 32, object()
    batch_ids: list[int] = []

    def asked() -> list[str]:
        got = read(runs, held, run, trace, batch_ids)
        assert got.as_list() == read_whole(held, run, batch_ids)
        return [r["span_id"] for r in got.as_list()]

    batch_ids.append(held.add(batch([(run, "1" * 16), ("b" * 32, "2" * 16)]), AT, [run]))
    assert asked() == ["1" * 16]
    first = read(runs, held, run, trace, batch_ids)
    # a retried export of the first span, and a new one
    batch_ids.append(held.add(batch([(run, "1" * 16), (run, "3" * 16)]), AT, [run]))
    assert runs.unread(run, trace, batch_ids)[2] == batch_ids[1:]
    assert asked() == ["1" * 16, "3" * 16]
    assert runs.unread(run, trace, batch_ids)[2] == []
    again = read(runs, held, run, trace, batch_ids)
    assert again.rows is first.rows and (first.count, again.count) == (1, 2)
    assert [r["span_id"] for r in first.as_list()] == ["1" * 16]
    # the run closed and came back with late spans: another open trace, none of its old batches
    late = [held.add(batch([(run, "4" * 16)]), AT, [run])]
    assert runs.unread(run, object(), late)[2] == late
    assert [r["span_id"] for r in read(runs, held, run, object(), late).as_list()] == ["4" * 16]


@pytest.mark.parametrize("first", ["fewer", "more"])
def test_two_readers_at_once_add_each_new_batch_once_and_miss_none(first: str) -> None:
    """A guard thread and the event loop may read a run's new batches at once, one of them
    seeing a batch more; each batch's rows are added once, whichever finishes first, and the
    batch after them is read at the next call."""
    held, runs = HeldSpans(1 << 30), HeldRuns()
    run, trace = "a" * 32, object()
    ids = [held.add(batch([(run, "1" * 16)]), AT, [run])]
    fewer = runs.unread(run, trace, list(ids))
    ids.append(held.add(batch([(run, "2" * 16)]), AT, [run]))
    more = runs.unread(run, trace, list(ids))
    for read_run, start, unread in (fewer, more) if first == "fewer" else (more, fewer):
        parts = held.held(unread)
        assert parts is not None
        runs.read(run, read_run, start, parts)
    ids.append(held.add(batch([(run, "3" * 16)]), AT, [run]))
    got = read(runs, held, run, trace, ids)
    assert [r["span_id"] for r in got.as_list()] == ["1" * 16, "2" * 16, "3" * 16]


def test_a_restored_trace_whose_earlier_batches_come_first_is_read_anew_in_order() -> None:
    """A trace whose round failed is restored with the spans that reopened it meanwhile: its
    batches, merged in arrival order, no longer start with the ones read before, so the run
    is read again from all of them, in the store's order."""
    held, runs = HeldSpans(1 << 30), HeldRuns()
    run, trace = "a" * 32, object()
    first = [held.add(batch([(run, s * 16)]), AT, [run]) for s in "12"]
    reopened = [held.add(batch([(run, "3" * 16)]), AT, [run])]
    assert [r["span_id"] for r in read(runs, held, run, trace, reopened).as_list()] == ["3" * 16]
    merged = sorted(first + reopened)
    got = read(runs, held, run, trace, merged)
    assert [r["span_id"] for r in got.as_list()] == ["1" * 16, "2" * 16, "3" * 16]


def test_a_batch_let_go_is_not_read() -> None:
    held = HeldSpans(1 << 30)
    kept = held.add(batch([("a" * 32, "1" * 16)]), AT, ["a" * 32])
    gone = held.add(batch([("a" * 32, "2" * 16)]), AT, ["a" * 32])
    held.drop(gone)
    assert held.held([kept, gone]) is None
    assert [b for b, _ in held.held([kept]) or []] == [kept]
