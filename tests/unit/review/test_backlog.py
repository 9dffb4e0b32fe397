"""The pending review items query over a real DuckDB store: what counts as an item, what answers
it, and which items are past their pack's SLA."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from collector.config.writer import WriterConfig
from collector.lifecycle import deadline_in
from collector.review.backlog import BacklogReader, Pending, Queue, pending, queues
from collector.store.database import Database
from collector.store.metrics import StoreMetrics
from collector.store.writer import Writer
from collector.targets import Target
from tests.support.review_backlog import human_label, review_row, run_row, store

NOW = datetime(2025, 6, 1, 12, 0)
DESK = Target("support-desk", "support-agent", "2.3.1")
SHOP = Target("shop-api", "checkout-agent", "1.2.0")
HOUR = 3600.0


@dataclass
class Store:
    database: Database
    writer: Writer

    def add(self, table: str, *rows: dict) -> None:
        store(self.writer, table, *rows)

    def pending(self, slas: dict[str, float] | None = None) -> list[Pending]:
        cursor = self.database.cursor()
        try:
            return pending(cursor, NOW, slas or {})
        finally:
            cursor.close()


@pytest.fixture
def db(tmp_path: Path) -> Iterator[Store]:
    database = Database(tmp_path / "sextant.duckdb")
    database.open()
    writer = Writer(database, WriterConfig(), StoreMetrics(CollectorRegistry()))
    writer.start()
    yield Store(database, writer)
    writer.shutdown(deadline_in(5))
    database.close()


def asked(trace_id: str, ago: timedelta, target: Target = DESK, **extra: object) -> dict:
    return review_row(trace_id, target, NOW - ago, **extra)  # type: ignore[arg-type]


def test_an_unanswered_review_of_a_current_run_is_pending_with_its_age(db: Store) -> None:
    db.add("trajectories", run_row("a" * 32, DESK, NOW - timedelta(hours=3)))
    db.add("trajectories", run_row("b" * 32, DESK, NOW - timedelta(hours=1)))
    db.add("results", asked("a" * 32, timedelta(hours=3)), asked("b" * 32, timedelta(hours=1)))
    [found] = db.pending()
    assert (found.pack, found.target, found.items) == ("refunds", DESK, 2)
    assert found.oldest == NOW - timedelta(hours=3)
    assert found.overdue == 0  # the pack has no review.sla


def test_a_human_label_answers_its_item_and_only_its_item(db: Store) -> None:
    item = asked("a" * 32, timedelta(hours=3))
    other_rule = asked("a" * 32, timedelta(hours=3), rule="refunds/approval-scope")
    db.add("trajectories", run_row("a" * 32, DESK, NOW - timedelta(hours=3)))
    db.add("results", item, other_rule)
    assert db.pending()[0].items == 2
    db.add("results", human_label(item, "pass", "ana", NOW - timedelta(minutes=5), "looks fine"))
    [left] = db.pending()
    assert left.items == 1
    db.add("results", human_label(other_rule, "fail", "ana", NOW))
    assert db.pending() == []


def test_items_of_a_replaced_revision_are_gone_and_a_label_of_an_older_revision_answers_nothing(
    db: Store,
) -> None:
    old = asked("a" * 32, timedelta(hours=3))
    replaced = run_row("a" * 32, DESK, NOW - timedelta(hours=3))
    db.add("trajectories", {**replaced, "is_current": False})
    db.add("trajectories", run_row("a" * 32, DESK, NOW - timedelta(hours=2), revision=2))
    new = asked("a" * 32, timedelta(hours=2), revision=2)
    db.add("results", old, new)
    [found] = db.pending()
    assert (found.items, found.oldest) == (1, NOW - timedelta(hours=2))  # revision 2's only
    db.add("results", human_label(old, "pass", "ana", NOW))  # labels revision 1
    assert db.pending()[0].items == 1
    db.add("results", human_label(new, "pass", "ana", NOW, revision=3))  # a later revision's
    assert db.pending() == []


def test_replay_external_window_and_decided_rows_are_not_items_nor_answers(db: Store) -> None:
    db.add("trajectories", run_row("a" * 32, DESK, NOW - timedelta(hours=3)))
    item = asked("a" * 32, timedelta(hours=3))
    db.add(
        "results",
        asked("a" * 32, timedelta(hours=3), rule="refunds/replayed", origin="replay"),
        {**asked("a" * 32, timedelta(hours=3), rule="refunds/external"), "origin": "external"},
        {**asked("a" * 32, timedelta(hours=3), rule="refunds/drift"), "scope": "window"},
        asked("a" * 32, timedelta(hours=3), rule="refunds/failed", verdict="fail"),
        item,
    )
    [found] = db.pending()
    assert found.items == 1
    replayed_label = {**human_label(item, "pass", "ana", NOW), "origin": "replay"}
    db.add("results", replayed_label)
    assert db.pending()[0].items == 1
    # a person's row that gives no verdict is neither an item nor an answer
    db.add("results", {**human_label(item, "pass", "bo", NOW), "verdict": "review"})
    assert db.pending()[0].items == 1
    db.add("results", human_label(item, "not_applicable", "bo", NOW))
    assert db.pending() == []


def test_items_past_their_packs_sla_are_overdue_longest_waiting_first(db: Store) -> None:
    for n, hours in enumerate((5, 1, 3), start=1):
        trace = f"{n:032x}"
        db.add("trajectories", run_row(trace, DESK, NOW - timedelta(hours=hours)))
        db.add("results", asked(trace, timedelta(hours=hours)))
    db.add("trajectories", run_row("e" * 32, SHOP, NOW - timedelta(hours=9)))
    db.add("results", asked("e" * 32, timedelta(hours=9), target=SHOP, rule="shop/refund-check"))
    by_pack = {p.pack: p for p in db.pending({"refunds": 2 * HOUR})}
    desk = by_pack["refunds"]
    assert (desk.items, desk.overdue) == (3, 2)
    assert desk.traces == (f"{1:032x}", f"{3:032x}")  # 5 h, then 3 h; the 1 h one is not due
    assert desk.newest_overdue == NOW - timedelta(hours=3)
    assert desk.rules == ("same-customer",)
    assert by_pack["shop"].overdue == 0  # no SLA for shop, however old


def test_queues_are_per_owner_and_pack_with_the_owner_in_force(db: Store) -> None:
    old = NOW - timedelta(hours=4)
    found = [
        Pending("refunds", DESK, "old-owner", 2, old, 1, old, ("a" * 32,)),
        Pending("refunds", SHOP, "old-owner", 1, NOW),
        Pending("retired", SHOP, "legal", 3, old),
    ]
    owners = {"refunds": "refunds-reviewers", "idle": "idle-team"}
    assert queues(found, owners, {"refunds": HOUR}) == {
        ("refunds-reviewers", "refunds"): Queue(3, old, HOUR),
        ("idle-team", "idle"): Queue(0, None, None),  # a pack in force with nothing to review
        ("legal", "retired"): Queue(3, old, None),  # no longer in force: its recorded owner
    }


def test_the_reader_reuses_its_last_read_until_its_interval_or_the_slas_change(db: Store) -> None:
    reader = BacklogReader(every=30)
    item = asked("a" * 32, timedelta(hours=3))
    db.add("trajectories", run_row("a" * 32, DESK, NOW - timedelta(hours=3)))
    db.add("results", item)
    cursor = db.database.cursor()
    try:
        assert reader.read(cursor, NOW, {})[0].items == 1
        db.add("results", human_label(item, "pass", "ana", NOW))
        assert reader.read(cursor, NOW + timedelta(seconds=29), {})[0].items == 1
        assert reader.read(cursor, NOW + timedelta(seconds=30), {}) == []
        db.add("trajectories", run_row("b" * 32, DESK, NOW))
        db.add("results", asked("b" * 32, timedelta(0)))
        later = NOW + timedelta(seconds=31)
        assert reader.read(cursor, later, {}) == []  # read 1 s ago
        assert reader.read(cursor, later, {"refunds": HOUR})[0].items == 1  # a new SLA: now
    finally:
        cursor.close()


def test_a_result_committed_after_a_read_that_followed_its_stamp_is_still_read(db: Store) -> None:
    """The reader reads from shortly before the oldest item waiting; a result stamped before
    a read and committed after it is not skipped for that."""
    reader = BacklogReader(every=0)
    cursor = db.database.cursor()
    try:
        assert reader.read(cursor, NOW, {}) == []
        db.add("trajectories", run_row("a" * 32, DESK, NOW - timedelta(minutes=2)))
        db.add("results", asked("a" * 32, timedelta(minutes=2)))  # stamped before that read
        assert reader.read(cursor, NOW + timedelta(seconds=1), {})[0].items == 1
    finally:
        cursor.close()
