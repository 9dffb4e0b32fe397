"""Which runs a side of a comparison holds: its target, its window, a snapshot, its last N runs."""

from __future__ import annotations

from datetime import timedelta

from collector.drift.sides import Side, exactly, matching
from collector.targets import describe_target
from tests.support.store import NOW, RunStore


def trace_ids(store: RunStore, side: Side) -> set[str]:
    query, params = side.sql()
    return {row[0] for row in store.cursor.execute(query, params).fetchall()}


def test_a_window_holds_the_closed_agent_runs_that_ended_inside_it(store: RunStore) -> None:
    inside = store.run(["search"], ago=timedelta(minutes=5))
    store.run(["search"], ago=timedelta(hours=2))  # ended before the window
    store.run(["search"], ago=timedelta(minutes=5), status="incomplete")
    store.run(["search"], ago=timedelta(minutes=5), agent_run=False)
    side = Side(start=NOW - timedelta(hours=1), end=NOW)
    assert trace_ids(store, side) == {inside}


def test_only_the_current_revision_of_a_rebuilt_run_counts(store: RunStore) -> None:
    store.run(["search"], trace_id="aa" * 16, revision=1, current=False)
    store.run(["search", "book"], trace_id="aa" * 16, revision=2)
    query, params = Side().sql()
    assert store.cursor.execute(query, params).fetchall()[0][:2] == ("aa" * 16, 2)
    assert len(store.cursor.execute(query, params).fetchall()) == 1


def test_exactly_one_target_and_a_missing_version_is_a_target_of_its_own(store: RunStore) -> None:
    released = store.run(version="1.4.0")
    unversioned = store.run(version=None)
    store.run(version="1.5.0")
    store.run(agent="other-agent", version="1.4.0")
    assert trace_ids(store, Side(*exactly(("travel-desk", "travel-agent", "1.4.0")))) == {released}
    assert trace_ids(store, Side(*exactly(("travel-desk", "travel-agent", None)))) == {unversioned}
    assert (
        describe_target(("travel-desk", "travel-agent", None)) == "travel-desk / travel-agent / -"
    )


def test_matching_takes_globs_and_none_matches_anything(store: RunStore) -> None:
    a = store.run(version="1.4.0")
    b = store.run(version="1.4.7")
    c = store.run(version="1.5.0", agent="booking-agent")
    assert trace_ids(store, Side(*matching(version="1.4.*"))) == {a, b}
    assert trace_ids(store, Side(*matching(agent="*-agent"))) == {a, b, c}
    assert trace_ids(store, Side(*matching())) == {a, b, c}


def test_the_last_n_runs_are_the_newest(store: RunStore) -> None:
    ids = [store.run(ago=timedelta(minutes=m)) for m in (50, 40, 30, 20, 10)]
    assert trace_ids(store, Side(runs=2)) == set(ids[-2:])


def test_a_snapshot_keeps_the_revisions_it_froze(store: RunStore) -> None:
    frozen = store.run(["search"], trace_id="bb" * 16, revision=1, current=False)
    store.run(["search", "book"], trace_id="bb" * 16, revision=2)
    store.run(["search"])  # not in the snapshot
    store.snapshot("release-1.4", [frozen], revision=1)
    query, params = Side(snapshot="release-1.4").sql()
    assert [row[:2] for row in store.cursor.execute(query, params).fetchall()] == [(frozen, 1)]
