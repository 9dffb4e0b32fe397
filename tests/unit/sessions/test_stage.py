"""The session stage on a real store and writer: closed runs are handed to it as they are
committed and a session's row follows from its new turns alone; a run that does not fit the
queue is read back from the store, once; and a row kept up from the turns' own columns is the
row rebuilding the session from all its stored turns makes."""

from __future__ import annotations

import hashlib
import time
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from prometheus_client import CollectorRegistry

from collector.assembler.records import RoundRows, step_json
from collector.clock import Clock, FakeClock, SystemClock
from collector.config.evaluation import SessionsConfig
from collector.config.writer import WriterConfig
from collector.errors import ShuttingDown
from collector.evaluation.metrics import RulesMetrics
from collector.evaluation.packs import PackText
from collector.sessions.loaded import read_turns
from collector.sessions.metrics import SessionMetrics
from collector.sessions.stage import SessionStage
from collector.sessions.turns import nanos, shifted
from collector.store.database import Database
from collector.store.metrics import StoreMetrics
from collector.store.writer import Writer
from evaluators.model import Trajectory
from tests.support.trajectories import llm, run, tool
from tests.support.wait import wait_for

SECOND = 10**9
# A session rule that selects no service: rows are made by loading every turn, as with any
# session rule in force, and no result changes them.
ELSEWHERE = """
name: elsewhere
version: "1"
owner: support-oncall
selector: {service: no-such-service}
rules:
  - id: session-turns
    type: budget
    scope: session
    max_turns: 100
    reason: session_too_long
"""


def round_tables(runs: list[Trajectory], at: datetime) -> dict[str, pa.Table]:
    """Closed runs as one assembly round's tables (no results)."""
    rows = RoundRows(at, {})
    for t in runs:
        rows.add(t, (at, at), [], step_json(t.steps))
    return rows.tables()


@dataclass
class Packs:
    texts: tuple[PackText, ...] = ()

    def snapshot(self) -> tuple[PackText, ...]:
        return self.texts


@dataclass
class Store:
    """A store, its running writer and a session stage over them (its thread not started)."""

    path: Path
    clock: Clock
    packs: Packs = field(default_factory=Packs)
    settings: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.database = Database(self.path)
        self.database.open()
        self.writer = Writer(
            self.database, WriterConfig(), StoreMetrics(CollectorRegistry()), clock=self.clock
        )
        self.writer.start()
        self.stage = self.new_stage()

    def new_stage(self) -> SessionStage:
        """A stage as the process starts it: nothing in memory, the store read back."""
        if hasattr(self, "stage"):
            self.stage.shutdown(time.monotonic() + 5)
        self.registry = CollectorRegistry()
        self.stage = SessionStage(
            SessionsConfig(**self.settings),
            self.database,
            self.writer,
            self.packs,
            SessionMetrics(self.registry),
            RulesMetrics(self.registry),
            self.clock,
        )
        self.writer.on_commit = self.stage.consume
        return self.stage

    def commit(self, turn: Trajectory) -> None:
        """Store a closed run (its row and steps) in a commit of its own, as assembly does."""
        self.writer.submit_tables(round_tables([turn], self.clock.now())).result(10)

    def sessions(self) -> list[dict[str, Any]]:
        with self.database.cursor() as cursor:
            cursor.execute("SELECT * FROM sessions ORDER BY session_id, session_service")
            names = [d[0] for d in cursor.description]
            return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]

    def counted(self, name: str, **labels: str) -> float:
        return self.registry.get_sample_value(name, labels) or 0.0

    def close(self) -> None:
        self.stage.shutdown(time.monotonic() + 5)
        self.writer.shutdown(time.monotonic() + 5)
        self.database.close()


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    opened = Store(tmp_path / "sextant.duckdb", FakeClock())
    yield opened
    opened.close()


def turn(
    clock: Clock,
    trace: int,
    conversation: str,
    *,
    ago: float = 10.0,
    seconds: float = 2.0,
    cost: float = 0.25,
    failing: bool = False,
    user: str | None = None,
    service: str = "support-desk",
    revision: int = 1,
) -> Trajectory:
    """A run of `conversation` stamped from `ago` seconds before the clock's now, lasting
    `seconds`: a model call costing `cost` and a tool call (failing if asked)."""
    steps = [llm(1, cost_usd=cost), tool(2, "lookup_customer", status="error" if failing else "ok")]
    built = replace(
        run(*steps),
        trace_id=f"{trace:032x}",
        revision=revision,
        conversation_id=conversation,
        user_id=user,
        service_name=service,
        start_time_unix_nano=0,
        end_time_unix_nano=int(seconds * SECOND),
    )
    start = nanos(clock.now()) - int(ago * SECOND)
    return shifted(built, start)


def test_a_handed_turn_updates_its_session_without_a_look_at_the_store(store: Store) -> None:
    """The row is made from the handed runs' own columns: none is in the store to read."""
    stage = store.stage
    stage.tick()  # the start's read-back: nothing stored
    runs = [
        turn(store.clock, 1, "conv-1", ago=30, cost=0.25, user="u-7"),
        turn(store.clock, 2, "conv-1", ago=20, cost=0.5, failing=True),
    ]
    at = store.clock.now()
    stage.consume(round_tables(runs, at), at)  # handed, never stored
    stage.tick()

    (found,) = store.sessions()
    assert found["trace_ids"] == [t.trace_id for t in runs]
    assert (found["turns"], found["steps"], found["tool_calls"], found["llm_calls"]) == (2, 6, 2, 2)
    assert (found["cost_usd"], found["error_count"], found["user_id"]) == (0.75, 1, "u-7")
    assert (found["input_tokens"], found["output_tokens"]) == (200, 20)
    assert found["status"] == "open" and found["verdict"] == "none"
    assert store.counted("sextant_session_turns_total") == 2


def test_a_committed_turn_wakes_the_stage(tmp_path: Path) -> None:
    """No tick comes for an hour: the commit hands the run and wakes the stage."""
    store = Store(tmp_path / "sextant.duckdb", SystemClock(), settings={"tick_seconds": 3600})
    try:
        store.stage.start()
        first = turn(store.clock, 1, "conv-wake")
        store.commit(first)
        wait_for(lambda: store.sessions(), timeout=10)  # the first tick has run
        second = turn(store.clock, 2, "conv-wake", ago=5)
        store.commit(second)

        def both() -> dict[str, Any] | None:
            (found,) = store.sessions()
            return found if found["turns"] == 2 else None

        found = wait_for(both, timeout=10)
        assert found["trace_ids"] == [first.trace_id, second.trace_id]
    finally:
        store.close()


def test_runs_that_overflow_the_queue_are_read_back_once(tmp_path: Path) -> None:
    store = Store(tmp_path / "sextant.duckdb", FakeClock(), settings={"max_queue": 2})
    try:
        store.stage.tick()  # caught up with an empty store
        runs = [turn(store.clock, n, "conv-full", ago=60 - 10 * n) for n in range(1, 6)]
        for t in runs:
            store.commit(t)  # one commit each: the first two fit the queue
        assert store.counted("sextant_sessions_queue_dropped_runs_total") == 3
        store.stage.tick()
        (found,) = store.sessions()
        assert found["trace_ids"] == [t.trace_id for t in runs]
        assert store.counted("sextant_session_turns_total") == 5  # the queued two not again
        assert store.counted("sextant_sessions_total", event="opened") == 1

        late = turn(store.clock, 6, "conv-full", ago=1)
        store.commit(late)
        store.stage.tick()
        (found,) = store.sessions()
        assert found["trace_ids"] == [*(t.trace_id for t in runs), late.trace_id]
        assert (found["turns"], found["cost_usd"]) == (6, 1.5)
        assert store.counted("sextant_session_turns_total") == 6
    finally:
        store.close()


def conversation(store: Store, stop: str) -> None:
    """Turns of three conversations, some stamped ahead of when they closed, some stamped
    before the turn that closed before them ended, one rebuilt by a late span, one session
    closed when idle and reopened, and a restart of the stage in between: `stop` is where
    the store is compared."""
    clock = store.clock
    assert isinstance(clock, FakeClock)

    def step(t: Trajectory) -> None:
        store.commit(t)
        store.stage.tick()
        clock.advance(3)

    step(turn(clock, 1, "conv-a", ago=30, user="u-1"))
    step(turn(clock, 2, "conv-b", ago=-3600, cost=0.125))  # a clock an hour fast
    step(turn(clock, 3, "conv-a", ago=40, seconds=5, failing=True))  # stamped before turn 1
    step(turn(clock, 4, "conv-a", ago=1, user=None, service="billing-desk"))
    step(turn(clock, 5, "conv-b", ago=2, seconds=0.5))
    rebuilt = turn(clock, 3, "conv-a", ago=50, seconds=7, revision=2, cost=1.0)
    again = replace(rebuilt.steps[-1], seq=3, span_id="s03")
    step(replace(rebuilt, steps=[*rebuilt.steps, again]))
    if stop == "rebuilt":
        return
    store.new_stage()  # a restart: the sessions are read from their rows
    store.stage.tick()
    step(turn(clock, 6, "conv-a", ago=2, user="u-2"))
    step(turn(clock, 7, "conv-b", ago=600))  # before every turn of its session
    clock.advance(1800)
    store.stage.tick()  # conv-a and conv-b close
    step(turn(clock, 8, "conv-b", ago=3, seconds=1))  # reopens it
    step(turn(clock, 9, "conv-c", ago=0.5, cost=0.0))


@pytest.mark.parametrize("stop", ["rebuilt", "end"])
@pytest.mark.parametrize("across", [False, True], ids=["per-service", "across-services"])
def test_a_row_kept_from_its_turns_is_the_row_loading_its_turns_makes(
    tmp_path: Path, stop: str, across: bool
) -> None:
    settings = {"across_services": across}
    kept = Store(tmp_path / "kept.duckdb", FakeClock(), settings=settings)
    text = PackText("elsewhere", hashlib.sha256(ELSEWHERE.encode()).hexdigest(), ELSEWHERE)
    loaded = Store(tmp_path / "loaded.duckdb", FakeClock(), Packs((text,)), settings)
    try:
        conversation(kept, stop)
        conversation(loaded, stop)
        assert kept.sessions() == loaded.sessions()
        assert len(kept.sessions()) == (4 if stop == "end" else 3) - across
        for name, labels in [
            ("sextant_session_turns_total", {}),
            ("sextant_sessions_total", {"event": "opened"}),
            ("sextant_sessions_total", {"event": "reopened"}),
            ("sextant_sessions_total", {"event": "closed"}),
        ]:
            assert kept.counted(name, **labels) == loaded.counted(name, **labels)
    finally:
        kept.close()
        loaded.close()


def test_turns_loaded_for_session_rules_are_kept_for_the_guard_as_the_store_reads_them(
    tmp_path: Path,
) -> None:
    """The guard reads a session's turns from memory when the stage made it lately, and from
    the store otherwise: the same turns on the same clock; a turn handed and not made yet is
    said to be waiting, for its conversation only."""
    text = PackText("elsewhere", hashlib.sha256(ELSEWHERE.encode()).hexdigest(), ELSEWHERE)
    store = Store(tmp_path / "sextant.duckdb", FakeClock(), Packs((text,)))
    try:
        store.stage.held.keep(10)  # as the guard asks
        store.stage.tick()  # caught up with an empty store
        first = turn(store.clock, 1, "conv-g", ago=30)
        store.commit(first)
        assert store.stage.waiting("conv-g") and not store.stage.waiting("conv-other")
        store.stage.tick()
        assert not store.stage.waiting("conv-g")
        ahead = turn(store.clock, 2, "conv-g", ago=-3600)  # a clock an hour fast
        store.commit(ahead)
        store.stage.tick()

        key = ("conv-g", "support-desk")
        held = store.stage.held.get(key)
        assert held is not None and held.traces == (first.trace_id, ahead.trace_id)
        assert held.turns[1].end_time_unix_nano <= nanos(store.clock.now())
        with store.stage.reader.cursor() as cursor:
            read = read_turns(cursor, key, 500)
        assert read.traces == held.traces and not read.truncated
        assert [(t.start_time_unix_nano, t.end_time_unix_nano) for t in read.turns] == [
            (t.start_time_unix_nano, t.end_time_unix_nano) for t in held.turns
        ]
        with store.stage.reader.cursor() as cursor:
            assert read_turns(cursor, ("conv-new", "support-desk"), 500).traces == ()
    finally:
        store.close()


def test_a_restarted_stage_reads_back_what_it_had_not_made(store: Store) -> None:
    """Runs stored while no stage ran are grouped at start; those a session holds are not
    counted again, and nothing is read twice when they are also handed."""
    first = turn(store.clock, 1, "conv-r", ago=20)
    store.commit(first)
    store.stage.tick()
    store.new_stage()
    second = turn(store.clock, 2, "conv-r", ago=10)
    store.commit(second)  # handed to the new stage, and stored before its first read
    store.stage.tick()
    (found,) = store.sessions()
    assert found["trace_ids"] == [first.trace_id, second.trace_id]
    assert store.counted("sextant_session_turns_total") == 1
    assert store.counted("sextant_sessions_total", event="opened") == 0


def test_a_read_back_after_an_overflow_starts_past_the_runs_handed(tmp_path: Path) -> None:
    """The follow moves up to the runs known to have been handed (a commit handed after the
    store was looked at), so an overflow does not read the whole lookback again."""
    store = Store(tmp_path / "sextant.duckdb", FakeClock(), settings={"max_queue": 1})
    try:
        clock = store.clock
        assert isinstance(clock, FakeClock)
        handed = []
        for n in (1, 2, 3):
            handed.append(turn(clock, n, "conv-mark", ago=30 - n))
            store.commit(handed[-1])
            store.stage.tick()  # its round looks at the store, the next one's commit follows
            clock.advance(1)
        with store.database.cursor() as cursor:
            seq = "SELECT store_seq FROM trajectories WHERE trace_id = ?"
            second = cursor.execute(seq, [handed[1].trace_id]).fetchone()[0]
        assert store.stage.follow.after == second
        first, dropped = turn(clock, 4, "conv-mark", ago=5), turn(clock, 5, "conv-mark", ago=4)
        store.commit(first)
        store.commit(dropped)  # the queue holds one run
        assert store.counted("sextant_sessions_queue_dropped_runs_total") == 1
        store.stage.tick()
        (found,) = store.sessions()
        assert found["trace_ids"] == [t.trace_id for t in [*handed, first, dropped]]
        assert store.counted("sextant_session_turns_total") == 5
    finally:
        store.close()


def test_the_lag_is_how_long_the_oldest_handed_run_has_waited(store: Store) -> None:
    clock = store.clock
    assert isinstance(clock, FakeClock)
    store.stage.tick()
    assert store.counted("sextant_sessions_lag_seconds") == 0.0
    store.commit(turn(clock, 1, "conv-lag"))
    clock.advance(4)
    store.commit(turn(clock, 2, "conv-lag"))
    clock.advance(3)
    assert store.counted("sextant_sessions_lag_seconds") == 7.0  # the first, committed 7 s ago
    store.stage.tick()
    assert store.counted("sextant_sessions_lag_seconds") == 0.0
    assert store.sessions()[0]["turns"] == 2


def test_turns_not_stored_are_made_again_and_counted_once(store: Store) -> None:
    """The store refuses the session's row: the handed turns wait for the next wake."""
    live = store.stage.writer
    store.stage.tick()
    runs = [turn(store.clock, 1, "conv-retry", ago=9), turn(store.clock, 2, "conv-retry", ago=8)]
    for t in runs:
        store.commit(t)
    stopped = Writer(store.database, WriterConfig(), StoreMetrics(CollectorRegistry()))
    stopped.shutdown(0.0)  # refuses what is submitted
    store.stage.writer = stopped
    with pytest.raises(ShuttingDown):  # the ticker logs it
        store.stage.tick()
    assert store.sessions() == []
    store.stage.writer = live
    store.stage.tick()
    (found,) = store.sessions()
    assert found["trace_ids"] == [t.trace_id for t in runs]
    assert store.counted("sextant_session_turns_total") == 2
    assert store.counted("sextant_sessions_total", event="opened") == 1


def test_a_late_revision_rebuilds_the_totals_of_every_turn(tmp_path: Path) -> None:
    """`max_turns` bounds what session rules read, not a session's totals: a late span's
    revision of a turn is summed with every other turn, none of them loaded."""
    store = Store(tmp_path / "sextant.duckdb", FakeClock(), settings={"max_turns": 2})
    try:
        clock = store.clock
        assert isinstance(clock, FakeClock)
        runs = [turn(clock, n, "conv-long", ago=40 - n, cost=0.25) for n in range(1, 5)]
        for t in runs:
            store.commit(t)
            store.stage.tick()
            clock.advance(1)
        late = replace(runs[1], revision=2, steps=[*runs[1].steps, llm(3, cost_usd=1.0)])
        late = replace(late, steps=[replace(s, span_id=f"r{s.seq}") for s in late.steps])
        store.commit(late)
        store.stage.tick()
        (found,) = store.sessions()
        assert found["trace_ids"] == [t.trace_id for t in runs]
        assert (found["turns"], found["steps"], found["llm_calls"]) == (4, 13, 5)
        assert (found["cost_usd"], found["input_tokens"]) == (2.0, 500)
        assert store.counted("sextant_session_turns_total") == 4
    finally:
        store.close()


# The shipped example's rule over tool failures in turns in a row: with no failure, each
# evaluation passes and names the session's latest turn.
REPEATED = """
name: support-sessions
version: "1.0.0"
owner: support-oncall
selector: {service: support-*}
rules:
  - id: failing-tool-across-turns
    type: repeated_failures
    min_turns: 3
    consecutive: true
    reason: repeated_tool_failure
    on_fail: DOWNGRADE
"""


@dataclass
class CommitsAfterRecord:
    """The stage's writer, which commits a turn (handed to the stage, as assembly's commits
    are) right after the stage's next write: a run closes while the stage is storing what it
    read back at its start, so the same tick makes it from the handed runs."""

    writer: Writer
    then: list[Trajectory]
    commit: Any

    def record(self, parts: dict[str, pa.Table], stopping: Any = None) -> None:
        self.writer.record(parts, stopping)
        while self.then:
            self.commit(self.then.pop(0))


def session_results(store: Store) -> list[tuple[str, str, datetime]]:
    """The session's rule results as a user lists them: (turn named, verdict, when), in the
    order they were evaluated."""
    with store.database.cursor() as cursor:
        return cursor.execute(
            "SELECT trace_id, verdict, evaluated_at FROM results WHERE scope = 'session'"
            " ORDER BY evaluated_at"
        ).fetchall()


@pytest.fixture
def repeated(tmp_path: Path) -> Iterator[tuple[Store, FakeClock]]:
    """A store under the pack of REPEATED, its stage started, and its clock."""
    text = PackText("support-sessions", hashlib.sha256(REPEATED.encode()).hexdigest(), REPEATED)
    store = Store(tmp_path / "sextant.duckdb", FakeClock(), Packs((text,)))
    try:
        assert isinstance(store.clock, FakeClock)
        store.stage.tick()
        yield store, store.clock
    finally:
        store.close()


def turns_of(store: Store, clock: FakeClock, session: str, count: int) -> list[Trajectory]:
    """`count` turns of `session`, the first two stored and evaluated a second apart."""
    runs = [turn(clock, n, session, ago=40 - n) for n in range(1, count + 1)]
    for t in runs[:2]:
        store.commit(t)
        store.stage.tick()
        clock.advance(1)
    return runs


def revise_first_and_list(store: Store, stage: SessionStage, runs: list[Trajectory]) -> list:
    """A late revision of the first turn, whose result is the same as before: the session's
    results listed after it."""
    late = replace(runs[0], revision=2, steps=[*runs[0].steps, llm(3)])
    store.commit(replace(late, steps=[replace(s, span_id=f"r{s.seq}") for s in late.steps]))
    stage.tick()
    listed = session_results(store)
    assert [(t, verdict) for t, verdict, _ in listed] == [(t.trace_id, "pass") for t in runs]
    times = [at for _, _, at in listed]
    assert times == sorted(set(times))  # each evaluated after the one before
    return listed


def test_a_result_read_back_and_one_handed_in_a_tick_are_in_order_and_not_stored_again(
    repeated: tuple[Store, FakeClock],
) -> None:
    """After a restart, the start's read-back stores a session's result and the runs handed
    meanwhile store the next in the same tick: they are not evaluated at the same instant, so
    the later is its rule's last result, and a late revision of an earlier turn, whose
    result is that one again, stores nothing."""
    store, clock = repeated
    runs = turns_of(store, clock, "conv-kill", 4)
    stage = store.new_stage()  # a restart: the store is read back at the first tick
    store.commit(runs[2])  # closed before that read
    stage.writer = CommitsAfterRecord(store.writer, [runs[3]], store.commit)  # type: ignore[assignment]
    stage.tick()  # reads back runs[2], then makes runs[3], handed meanwhile
    assert [t for t, _, _ in session_results(store)] == [t.trace_id for t in runs]
    clock.advance(1)
    revise_first_and_list(store, stage, runs)
    (found,) = store.sessions()
    assert found["trace_ids"] == [t.trace_id for t in runs]


def test_a_result_made_after_the_clock_stepped_back_is_still_its_rules_last(
    repeated: tuple[Store, FakeClock],
) -> None:
    """The wall clock is set back across a restart: the next result is still evaluated after
    the ones before it, so a late revision that finds it again stores nothing."""
    store, clock = repeated
    runs = turns_of(store, clock, "conv-clock", 3)
    stage = store.new_stage()
    clock.advance(-5)  # set back while the process was down
    store.commit(runs[2])
    stage.tick()
    clock.advance(1)
    revise_first_and_list(store, stage, runs)


def test_turns_kept_for_the_guard_are_let_go_when_made_without_session_rules(
    tmp_path: Path,
) -> None:
    """While no pack has session rules the stage makes sessions without reading their turns:
    what it kept of them would be stale when a pack with session rules comes back."""
    text = PackText("elsewhere", hashlib.sha256(ELSEWHERE.encode()).hexdigest(), ELSEWHERE)
    packs = Packs((text,))
    store = Store(tmp_path / "sextant.duckdb", FakeClock(), packs)
    try:
        store.stage.held.keep(10)
        store.stage.tick()
        first = turn(store.clock, 1, "conv-g", ago=30)
        store.commit(first)
        store.stage.tick()
        key = ("conv-g", "support-desk")
        kept = store.stage.held.get(key)
        assert kept is not None and kept.traces == (first.trace_id,)
        packs.texts = ()
        store.commit(turn(store.clock, 2, "conv-g", ago=18))
        store.stage.tick()
        assert store.stage.held.get(key) is None  # the guard reads the store instead
        packs.texts = (text,)
        store.commit(turn(store.clock, 3, "conv-g", ago=10))
        store.stage.tick()
        kept = store.stage.held.get(key)
        with store.stage.reader.cursor() as cursor:
            assert kept is not None and kept.traces == read_turns(cursor, key, 500).traces
    finally:
        store.close()
