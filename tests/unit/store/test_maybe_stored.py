"""The filter of stored keys never forgets one, rarely names a new key, and loads a store."""

from __future__ import annotations

import os
from pathlib import Path

from collector.assembler.read_back import STORED_TRACES
from collector.sessions.stage import STORED_KEYS
from collector.store.database import Database
from collector.store.maybe_stored import MaybeStored


def ids(count: int) -> list[str]:
    return [os.urandom(16).hex() for _ in range(count)]


def test_every_stored_run_is_named_however_many_layers_it_grew() -> None:
    runs = MaybeStored(capacity=1_000, rate=0.01, complete=True)
    stored = ids(15_000)  # layers of 1,000, 2,000, 4,000 and 8,000 ids
    for start in range(0, len(stored), 700):
        runs.add(stored[start : start + 700])
    assert runs.maybe_stored(stored) == stored
    assert runs.count == len(stored)


def test_new_traces_are_rarely_taken_for_stored_ones() -> None:
    """Each layer halves the rate of the one before, so the filter's is about their sum, under
    twice the first layer's: here 1.875 in 100 (measured 1.85-1.95 over 200,000 new ids)."""
    runs = MaybeStored(capacity=1_000, rate=0.01, complete=True)
    runs.add(ids(15_000))
    fresh = ids(200_000)
    taken = len(runs.maybe_stored(fresh))
    assert taken < 0.023 * len(fresh)
    assert runs.bytes < 2 * 15_000  # 9.6 to 13.8 bits an id for rates of 1 to 1/8 in 100


def test_sequential_ids_are_spread_like_random_ones() -> None:
    """Some SDKs number their traces: ids that differ in a few digits still hash apart."""
    runs = MaybeStored(capacity=10_000, rate=0.001, complete=True)
    runs.add([f"{i:032x}" for i in range(10_000)])
    fresh = [f"{i:032x}" for i in range(10_000, 110_000)]
    assert len(runs.maybe_stored(fresh)) < 0.003 * len(fresh)


def test_a_restart_loads_every_run_the_store_holds(tmp_path: Path) -> None:
    database = Database(tmp_path / "sextant.duckdb")
    database.open()
    stored = ids(2_500)
    database.connection.execute(
        "INSERT INTO trajectories (trace_id, revision, is_current)"
        " SELECT unnest($ids), 1, true UNION ALL SELECT $late, 2, true",
        {"ids": stored, "late": stored[0]},
    )
    runs: MaybeStored[str] = MaybeStored()
    fresh = ids(10_000)
    assert runs.maybe_stored(fresh) == fresh  # not loaded: any may be stored
    assert runs.load(database.cursor(), STORED_TRACES) == 2_501
    assert runs.maybe_stored(stored) == stored
    assert len(runs.maybe_stored(fresh)) <= 3  # 1 in 100,000 would be asked
    database.close()


def test_loaded_behind_every_key_may_be_stored_until_the_load_is_done(tmp_path: Path) -> None:
    """A stage starts at once and asks the store about every key until the filter holds the
    stored ones; a key added meanwhile (a run committed while loading) is kept."""
    database = Database(tmp_path / "sextant.duckdb")
    database.open()
    stored = ids(300_000)
    database.connection.execute(
        "INSERT INTO trajectories (trace_id, revision, is_current) SELECT unnest($ids), 1, true",
        {"ids": stored},
    )
    runs: MaybeStored[str] = MaybeStored()
    runs.load_behind(database, STORED_TRACES)
    loading = runs.loading
    assert loading is not None
    committed, fresh = ids(1), ids(1_000)
    runs.add(committed)
    assert loading.is_alive()  # three batches of 100,000 to hash
    assert runs.maybe_stored(fresh) == fresh
    loading.join(30)
    assert runs.maybe_stored(stored + committed) == stored + committed
    assert len(runs.maybe_stored(fresh)) <= 2  # 1 in 100,000 would be asked
    database.close()


def test_sessions_are_keyed_by_id_and_service(tmp_path: Path) -> None:
    """The sessions stage's keys: a session of another service is another key."""
    database = Database(tmp_path / "sextant.duckdb")
    database.open()
    database.connection.execute(
        "INSERT INTO sessions (session_id, status, turns, reopened, last_turn_at,"
        " session_service) SELECT 'conv-' || i, 'open', 1, 0, now(), 'desk' FROM range(300) t(i)"
    )
    keys: MaybeStored[tuple[str, str]] = MaybeStored(capacity=1_000, rate=0.001)
    assert keys.load(database.cursor(), STORED_KEYS) == 300
    asked = [("conv-7", "desk"), ("conv-7", "travel"), ("conv-300", "desk")]
    assert keys.maybe_stored(asked) == [("conv-7", "desk")]
    database.close()
