"""The assembler over a real store, ticked by hand with a fake clock."""

from __future__ import annotations

import concurrent.futures
import threading
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from collector.assembler.assembler import Assembler
from collector.assembler.metrics import AssemblerMetrics
from collector.assembler.pace import PRIOR_SPANS_PER_SECOND_PER_NATIVE_THREAD
from collector.assembler.work import Closing, split_round
from collector.clock import FakeClock
from collector.config.sections import AssemblerConfig
from collector.config.writer import WriterConfig
from collector.lifecycle import deadline_in
from collector.normalize.wire import decode_request
from collector.store.database import Database
from collector.store.metrics import StoreMetrics
from collector.store.writer import Writer
from collector.workers import WorkerPool
from tests.support.otlp import new_span_id, new_trace_id, trace_request
from tests.support.wait import wait_for


@pytest.fixture
def rig(tmp_path: Path):
    database = Database(tmp_path / "a.duckdb")
    database.open()
    registry = CollectorRegistry()
    writer = Writer(database, WriterConfig(), StoreMetrics(registry))
    clock = FakeClock()
    assembler = Assembler(
        AssemblerConfig(quiet_period_seconds=5, max_trace_age_seconds=60),
        database,
        writer,
        WorkerPool(0),
        {},
        AssemblerMetrics(registry),
        clock,
    )
    writer.on_commit = assembler.consume
    writer.start()
    recovered(assembler)
    yield database, writer, assembler, clock, registry
    writer.shutdown(deadline_in(5))
    database.close()


def restarted(assembler: Assembler) -> Assembler:
    """A new assembler over the same store: what a restart starts with."""
    return Assembler(
        assembler.config,
        assembler.database,
        assembler.writer,
        WorkerPool(0),
        {},
        AssemblerMetrics(CollectorRegistry()),
        assembler.clock,
    )


def recovered(assembler: Assembler) -> int:
    """What `start` recovers, once the filter of stored runs is loaded (behind it)."""
    count = assembler.recover()
    loading = assembler._stored_runs.loading
    assert loading is not None
    loading.join(10)
    return count


def store(writer: Writer, spans: list[dict]) -> None:
    body = trace_request(spans).SerializeToString()
    writer.submit("spans", decode_request("traces", "protobuf", body, 1000).table).result(10)


def run_spans(trace_id: bytes) -> tuple[dict, list[dict]]:
    root = {
        "trace_id": trace_id,
        "span_id": new_span_id(),
        "name": "invoke_agent a",
        "attributes": {"gen_ai.operation.name": "invoke_agent"},
    }
    children = [
        {
            "trace_id": trace_id,
            "span_id": new_span_id(),
            "parent_span_id": root["span_id"],
            "name": f"execute_tool t{i}",
            "start": 1_700_000_000_000_000_000 + i,
            "attributes": {"gen_ai.operation.name": "execute_tool"},
        }
        for i in range(3)
    ]
    return root, children


def current(database: Database, trace_id: bytes):
    return (
        database.cursor()
        .execute(
            "SELECT revision, steps, status, late_spans FROM trajectories"
            " WHERE trace_id = ? AND is_current",
            [trace_id.hex()],
        )
        .fetchall()
    )


def test_close_after_quiet_period_then_reopen_on_a_late_span(rig) -> None:
    database, writer, assembler, clock, registry = rig
    trace_id = new_trace_id()
    root, children = run_spans(trace_id)
    store(writer, children[:2])
    store(writer, [root])
    clock.advance(4.9)
    assert assembler.tick() == 0
    clock.advance(0.2)
    assert assembler.tick() == 1
    assert current(database, trace_id) == [(1, 3, "ok", 0)]

    store(writer, children[2:])  # late
    clock.advance(5.1)
    assert assembler.tick() == 1
    assert current(database, trace_id) == [(2, 4, "ok", 1)]
    assert registry.get_sample_value("sextant_assembler_reopened_trajectories_total") == 1
    assert registry.get_sample_value("sextant_assembler_late_spans_total") == 1
    latency = registry.get_sample_value("sextant_assembler_assembly_latency_seconds_sum")
    assert latency == pytest.approx(5.1 + 5.1, abs=0.01)


def test_restart_recovers_open_traces_with_their_clock(rig, tmp_path: Path) -> None:
    database, writer, assembler, clock, _registry = rig
    trace_id = new_trace_id()
    root, children = run_spans(trace_id)
    store(writer, [*children, root])
    fresh = restarted(assembler)
    assert recovered(fresh) == 1
    clock.advance(5.1)
    # the spans were stored moments ago in wall time, so the quiet period is measured from then
    assert fresh.tick() == 1
    assert current(database, trace_id) == [(1, 4, "ok", 0)]
    assert recovered(fresh) == 0


def test_a_store_failure_puts_traces_back_for_the_next_tick(rig) -> None:
    database, writer, assembler, clock, registry = rig
    trace_id = new_trace_id()
    root, children = run_spans(trace_id)
    store(writer, [*children, root])
    clock.advance(6)
    original = writer.submit_tables

    def refuse(parts):
        raise RuntimeError("queue full")

    writer.submit_tables = refuse
    assert assembler.tick() == 0
    assert registry.get_sample_value("sextant_assembler_errors_total") == 1
    writer.submit_tables = original
    assert assembler.tick() == 1
    assert current(database, trace_id) == [(1, 4, "ok", 0)]


def test_pending_traces_count_every_trace_until_its_trajectory_is_stored(rig) -> None:
    """What says "caught up" without a query: spans noted, and nothing pending, including a
    trace closed early at a bound and a round that is being stored."""
    database, writer, assembler, clock, registry = rig
    pending = "sextant_assembler_pending_traces"
    first, bounded = new_trace_id(), new_trace_id()
    root, children = run_spans(first)
    store(writer, [*children, root])
    assert registry.get_sample_value("sextant_assembler_spans_total") == 4
    assert registry.get_sample_value(pending) == 1
    assembler.config = assembler.config.model_copy(update={"max_spans_per_trace": 3})
    assembler._buffers.config = assembler.config
    root, children = run_spans(bounded)
    store(writer, [*children, root])  # 4 spans > 3: closes at once, stored on the next tick
    assert registry.get_sample_value("sextant_assembler_open_traces") == 1  # only `first`
    assert registry.get_sample_value(pending) == 2
    assert registry.get_sample_value("sextant_assembler_spans_total") == 8

    during: list[float | None] = []
    original = writer.submit_tables

    def observed(tables):
        during.append(registry.get_sample_value(pending))
        return original(tables)

    writer.submit_tables = observed
    assert assembler.tick() == 1  # the bounded trace; `first` is not quiet yet
    assert during == [1 + 1]  # `first` open, `bounded` being stored
    assert registry.get_sample_value(pending) == 1
    clock.advance(5.1)
    assert assembler.tick() == 1
    assert registry.get_sample_value(pending) == 0
    assert len(current(database, first)) == 1


def test_late_spans_stored_before_a_restart_reopen_as_rooted(rig) -> None:
    database, writer, assembler, clock, _registry = rig
    trace_id = new_trace_id()
    root, children = run_spans(trace_id)
    store(writer, [*children[:2], root])
    clock.advance(6)
    assert assembler.tick() == 1
    store(writer, children[2:])  # late, and then the process restarts
    fresh = restarted(assembler)
    assert recovered(fresh) == 1
    clock.advance(5.1)
    assert fresh.tick() == 1  # after the quiet period, not the maximum age
    assert current(database, trace_id) == [(2, 4, "ok", 1)]


def test_late_spans_after_a_restart_reopen_as_rooted(rig) -> None:
    """The trace closed with its root before the restart; spans that come after it (an
    exporter retrying what the stopped process never answered) rebuild it after the quiet
    period, as they would have without the restart, not at the maximum age."""
    database, writer, assembler, clock, _registry = rig
    trace_id = new_trace_id()
    root, children = run_spans(trace_id)
    store(writer, [*children[:2], root])
    clock.advance(6)
    assert assembler.tick() == 1
    fresh = restarted(assembler)
    assert recovered(fresh) == 0
    writer.on_commit = fresh.consume
    store(writer, children[2:])  # late, after the restart
    clock.advance(5.1)
    assert fresh.tick() == 1
    assert current(database, trace_id) == [(2, 4, "ok", 1)]


def test_turned_off_it_only_stores_and_assembles_what_it_missed_once_on(rig) -> None:
    database, writer, assembler, clock, _registry = rig
    off = Assembler(
        assembler.config.model_copy(update={"enabled": False}),
        database,
        writer,
        WorkerPool(0),
        {},
        AssemblerMetrics(CollectorRegistry()),
        clock,
    )
    writer.on_commit = off.consume
    off.start()
    trace_id = new_trace_id()
    root, children = run_spans(trace_id)
    store(writer, [*children, root])
    clock.advance(5.1)
    assert (off.threads(), off.backlog(), off.tick()) == ([], 0, 0)
    off.shutdown(deadline_in(1))
    assert current(database, trace_id) == []
    on = restarted(assembler)
    assert recovered(on) == 1
    clock.advance(5.1)
    assert on.tick() == 1
    assert current(database, trace_id) == [(1, 4, "ok", 0)]


def built_in_parts(
    tmp_path: Path, config: AssemblerConfig, workers: WorkerPool
) -> tuple[list, set[str]]:
    """400 traces of 4 spans closed in one round: the stored trajectories and steps (less when
    their spans were stored and when they were closed), and the names of the threads alive
    once the round is stored."""
    database = Database(tmp_path / "p.duckdb")
    database.open()
    registry = CollectorRegistry()
    writer = Writer(database, WriterConfig(), StoreMetrics(registry))
    clock = FakeClock()
    assembler = Assembler(config, database, writer, workers, {}, AssemblerMetrics(registry), clock)
    writer.on_commit = assembler.consume
    writer.start()
    workers.start()
    assembler.start()
    try:
        spans = []
        for i in range(400):
            root, children = run_spans((i + 1).to_bytes(16, "big"))
            for j, span in enumerate([root, *children]):  # the same ids in every store
                span["span_id"] = (i * 8 + j + 1).to_bytes(8, "big")
                if j:
                    span["parent_span_id"] = root["span_id"]
            spans += [root, *children]
        store(writer, spans)
        clock.advance(6)
        closed = {"reason": "complete"}
        wait_for(
            lambda: (
                registry.get_sample_value("sextant_assembler_traces_closed_total", closed) == 400
            )
        )
        threads = {thread.name for thread in threading.enumerate()}
        cursor = database.cursor()
        rows = cursor.execute(
            "SELECT * EXCLUDE (first_received_at, last_received_at, closed_at, store_seq)"
            " FROM trajectories ORDER BY trace_id"
        ).fetchall()
        steps = cursor.execute("SELECT * FROM steps ORDER BY trace_id, seq").fetchall()
        return [rows, steps], threads
    finally:
        assembler.shutdown(deadline_in(5))
        workers.shutdown(deadline_in(5))
        writer.shutdown(deadline_in(5))
        database.close()


def test_a_round_too_big_for_one_worker_is_built_by_each_in_parts(tmp_path: Path) -> None:
    """Without the native path, two worker processes build a part each, and every trace is
    stored once, whole, as it would be built in one piece."""
    config = AssemblerConfig(quiet_period_seconds=5, max_trace_age_seconds=60, native=False)
    workers = WorkerPool(2)
    rows, threads = built_in_parts(tmp_path / "workers", config, workers)
    trajectories, steps = rows
    assert len({r[0] for r in trajectories}) == len(trajectories) == 400
    assert len(steps) == 1600
    assert "sextant-assembler_0" in threads  # a thread waiting on each worker's part


def test_native_rounds_are_built_in_the_collectors_threads_not_in_worker_processes(
    tmp_path: Path,
) -> None:
    """With the native path, the parts of a round are built in two threads of the collector
    (`sextant-native`), none in a worker process, and what is stored is what the worker
    processes store."""
    base = {"quiet_period_seconds": 5, "max_trace_age_seconds": 60}
    in_workers, _ = built_in_parts(
        tmp_path / "workers", AssemblerConfig(**base, native=False), WorkerPool(2)
    )
    workers = WorkerPool(2)  # what a pipeline with the native path never starts
    in_threads, threads = built_in_parts(
        tmp_path / "threads", AssemblerConfig(**base, native=True, native_threads=2), workers
    )
    assert in_threads == in_workers
    assert "sextant-native_0" in threads  # the pool starts a second one unless the first is idle
    assert not any(name.startswith("sextant-assembler_") for name in threads)


def test_a_round_is_split_in_parts_of_at_least_the_inline_size() -> None:
    closing = [Closing(f"{i:032x}", "complete", 1, None) for i in range(10)]
    assert [len(p) for p in split_round(closing, 1600, workers=2, least=200)] == [5, 5]
    assert [len(p) for p in split_round(closing, 1600, workers=4, least=200)] == [3, 3, 3, 1]
    assert len(split_round(closing, 300, workers=2, least=200)) == 1  # too small to share
    assert [len(p) for p in split_round(closing[:1], 5000, workers=2, least=200)] == [1]


def read_back(registry: CollectorRegistry, why: str) -> float:
    value = registry.get_sample_value("sextant_assembler_read_back_traces_total", {"why": why})
    return value or 0.0


def stored_run(database: Database, trace_id: bytes) -> tuple[list, list]:
    """A trajectory's stored row and its steps, less when its spans were stored and when it
    was closed."""
    cursor = database.cursor()
    run = cursor.execute(
        "SELECT * EXCLUDE (first_received_at, last_received_at, closed_at, store_seq)"
        " FROM trajectories WHERE trace_id = ?",
        [trace_id.hex()],
    ).fetchall()
    steps = cursor.execute(
        "SELECT * FROM steps WHERE trace_id = ? ORDER BY seq", [trace_id.hex()]
    ).fetchall()
    return run, steps


def test_closing_traces_are_built_from_the_held_batches_not_read_back(rig) -> None:
    database, writer, assembler, clock, registry = rig
    first, second = new_trace_id(), new_trace_id()
    root, children = run_spans(first)
    store(writer, children[:2])
    other_root, other_children = run_spans(second)
    store(writer, [*children[2:], root, other_root, *other_children[:1]])
    store(writer, [children[0]])  # an exporter's retry: stored once, built once
    assert registry.get_sample_value("sextant_assembler_held_bytes") > 0
    assert registry.get_sample_value("sextant_assembler_stored_runs_filter_bytes") > 0
    clock.advance(5.1)
    assert assembler.tick() == 2
    assert current(database, first) == [(1, 4, "ok", 0)]
    assert current(database, second) == [(1, 2, "ok", 0)]
    assert sum(read_back(registry, why) for why in ("recovered", "late", "spilled", "bound")) == 0
    # every trace of the batches closed: nothing is held any more
    assert registry.get_sample_value("sextant_assembler_held_bytes") == 0


def test_past_the_memory_cap_traces_are_read_back_and_built_the_same(tmp_path: Path) -> None:
    runs = {}
    for cap in (256, 0):  # held in memory, then every batch let go at once
        database = Database(tmp_path / f"{cap}.duckdb")
        database.open()
        registry = CollectorRegistry()
        writer = Writer(database, WriterConfig(), StoreMetrics(registry))
        clock = FakeClock()
        config = AssemblerConfig(quiet_period_seconds=5, max_held_mib=cap)
        assembler = Assembler(
            config, database, writer, WorkerPool(0), {}, AssemblerMetrics(registry), clock
        )
        writer.on_commit = assembler.consume
        writer.start()
        trace_id = bytes.fromhex("4bf92f3577b34da6a3ce929d0e0e4736")
        root, children = run_spans(trace_id)
        for i, span in enumerate([root, *children]):  # the same ids in both stores
            span["span_id"] = bytes([i + 1]) * 8
            if i:
                span["parent_span_id"] = root["span_id"]
        store(writer, children)
        store(writer, [root])
        clock.advance(5.1)
        assert assembler.tick() == 1
        runs[cap] = stored_run(database, trace_id)
        assert read_back(registry, "spilled") == (1 if cap == 0 else 0)
        writer.shutdown(deadline_in(5))
        database.close()
    assert runs[256] == runs[0]
    assert runs[0][0][0][3] == "ok" and len(runs[0][1]) == 4


def test_recovered_and_late_traces_are_read_back_from_the_store(rig) -> None:
    database, writer, assembler, clock, registry = rig
    trace_id = new_trace_id()
    root, children = run_spans(trace_id)
    store(writer, [root, *children[:2]])
    fresh = restarted(assembler)
    writer.on_commit = fresh.consume
    assert recovered(fresh) == 1
    store(writer, children[2:])  # after the restart: held, but the trace's first spans are not
    clock.advance(5.1)
    assert fresh.tick() == 1
    assert current(database, trace_id) == [(1, 4, "ok", 0)]
    late = {**children[0], "span_id": new_span_id(), "name": "execute_tool late"}
    store(writer, [late])
    clock.advance(5.1)
    assert fresh.tick() == 1
    assert current(database, trace_id) == [(2, 5, "ok", 1)]
    assert read_back(registry, "recovered") == read_back(registry, "late") == 0
    counted = fresh.metrics.read_back  # the restarted assembler's own registry
    assert [counted.labels(why)._value.get() for why in ("recovered", "late")] == [1, 1]


def test_traces_recovered_at_a_restart_hold_no_live_traffic_back(rig) -> None:
    _database, writer, assembler, clock, _registry = rig
    trace_id = new_trace_id()
    root, children = run_spans(trace_id)
    store(writer, [root, *children])
    fresh = restarted(assembler)
    writer.on_commit = fresh.consume
    recovered(fresh)
    clock.advance(30)  # long past due: the backlog of the last run
    assert fresh.lag() >= 25
    assert fresh.live_lag() == 0  # refusing new spans would not close it sooner
    assert fresh.tick() == 1
    store(writer, [run_spans(new_trace_id())[0]])
    clock.advance(10)  # a live trace 5 s past due: live traffic is behind now
    assert fresh.live_lag() == pytest.approx(5, abs=0.01)


def test_spans_waiting_for_their_load_count_as_lag(rig) -> None:
    """Acknowledged spans close a quiet period after they are loaded, and wait for their round
    then: while the writer is 0.5 s behind on loads, the traffic arriving now is judged that
    much later than assembly alone says."""
    _database, writer, assembler, clock, _registry = rig
    assert assembler.live_lag(coming=1000) == 0
    assert assembler.live_lag(coming=1000, loading=2.5) == 2.5
    root, children = run_spans(new_trace_id())
    store(writer, [*children, root])
    clock.advance(6.5)  # due 1.5 s ago, not closed yet
    assert assembler.live_lag() == pytest.approx(1.5)
    assert assembler.live_lag(loading=0.5) == pytest.approx(2.0)


def test_spans_held_and_on_their_way_count_as_lag_before_any_trace_is_late(rig) -> None:
    _database, writer, assembler, _clock, registry = rig
    root, children = run_spans(new_trace_id())
    store(writer, [root, *children])
    assert assembler.lag() == 0 and assembler.live_lag() == 0
    # built natively in the collector's threads: the assumed pace is a native thread's each
    prior = PRIOR_SPANS_PER_SECOND_PER_NATIVE_THREAD * assembler.config.native_threads
    # acknowledged spans not loaded yet, as many as take 7 s at the assumed pace: 2 s past
    # the 5 s quiet period they wait anyway
    coming = int(prior * 7) - 4
    assert assembler.live_lag(coming) == pytest.approx(2.0)
    assert registry.get_sample_value("sextant_assembler_expected_lag_seconds") == 0


def test_with_a_backlog_the_next_round_is_built_while_the_one_before_commits(rig) -> None:
    """A round's commit waits on the writer (a commit of exports, a checkpoint): the next round
    is built meanwhile, and the rounds are still stored in order, each counted once stored."""
    database, writer, assembler, clock, registry = rig
    assembler.config = assembler.config.model_copy(update={"max_round_traces": 1})
    traces = [new_trace_id() for _ in range(3)]
    for trace_id in traces:
        root, children = run_spans(trace_id)
        store(writer, [*children, root])
    clock.advance(6)
    held, built, stored = threading.Event(), [], []
    build_round = assembler.dispatch.build_round

    def building(spans, closing, *args):
        built.append(closing[0].trace_id)
        return build_round(spans, closing, *args)

    def committed(tables, received_at):
        if "trajectories" in tables:
            stored.extend(tables["trajectories"]["trace_id"].to_pylist())
            held.wait(10)  # the writer is busy with the first round's commit
        assembler.consume(tables, received_at)

    assembler.dispatch.build_round = building
    writer.on_commit = committed
    ticked: list[int] = []
    tick = threading.Thread(target=lambda: ticked.append(assembler.tick()))
    tick.start()
    wait_for(lambda: len(stored) == 1 and len(built) == 2)
    assert registry.get_sample_value("sextant_assembler_pending_traces") == 3
    held.set()
    tick.join(10)
    assert ticked == [3]
    assert stored == built  # in the order they were built
    assert sorted(stored) == sorted(t.hex() for t in traces)
    assert registry.get_sample_value("sextant_assembler_pending_traces") == 0
    assert registry.get_sample_value("sextant_assembler_round_duration_seconds_count") == 3
    assert all(len(current(database, trace_id)) == 1 for trace_id in traces)


def test_a_trace_closing_again_while_its_round_commits_waits_for_that_commit(rig) -> None:
    """Late spans that close a trace again at once (a bound) while its round is still being
    committed: its next revision is read and built only once the one before is stored."""
    database, writer, assembler, clock, _registry = rig
    trace_id = new_trace_id()
    root, children = run_spans(trace_id)
    store(writer, [*children, root])
    update = {"max_round_traces": 1, "max_spans_per_trace": 4}
    assembler.config = assembler.config.model_copy(update=update)
    assembler._buffers.config = assembler.config
    clock.advance(6)
    late = [{**child, "span_id": new_span_id()} for child in [*children, *children]]
    late_table = decode_request(
        "traces", "protobuf", trace_request(late).SerializeToString(), 1000
    ).table
    held, waited, built = threading.Event(), threading.Event(), []
    build_round = assembler.dispatch.build_round

    def building(spans, closing, *args):
        built.append((closing[0].trace_id, closing[0].revision))
        return build_round(spans, closing, *args)

    def committed(tables, received_at):
        if "trajectories" in tables:
            held.wait(10)  # the writer is busy with the first revision's commit
        assembler.consume(tables, received_at)

    queue_record = writer.queue_record

    def queued(parts, *args):
        # its 6 late spans arrive meanwhile, over max_spans_per_trace: it closes again at once
        assembler.consume({"spans": late_table}, clock.now())
        inner = queue_record(parts, *args)
        outer: concurrent.futures.Future[None] = concurrent.futures.Future()
        inner.add_done_callback(lambda f: outer.set_result(f.result()))

        def result(timeout=None):
            waited.set()
            return concurrent.futures.Future.result(outer, timeout)

        outer.result = result  # type: ignore[method-assign]
        return outer

    assembler.dispatch.build_round = building
    writer.on_commit = committed
    writer.queue_record = queued
    ticked: list[int] = []
    tick = threading.Thread(target=lambda: ticked.append(assembler.tick()))
    tick.start()
    wait_for(waited.is_set)
    assert built == [(trace_id.hex(), 1)]  # not built again before revision 1 is stored
    writer.queue_record = queue_record
    held.set()
    tick.join(10)
    assert ticked == [2]
    assert built == [(trace_id.hex(), 1), (trace_id.hex(), 2)]
    assert [row[0] for row in current(database, trace_id)] == [2]
