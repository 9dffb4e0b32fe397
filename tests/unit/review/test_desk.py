"""The review desk over a real store: claims that two reviewers never share and that expire,
and labels stored as the result rows the contract says."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest

from collector.clock import FakeClock
from collector.review.desk import Anonymous, Gone, Held
from collector.review.queue import Filters, items, queues
from tests.support.review import ReviewStore, desk_over

A, B, C = ("a" * 32, "b" * 32, "c" * 32)
RULE = ("support-mcp", "known-mcp-servers")


@pytest.fixture
def store(tmp_path: Path) -> Iterator[ReviewStore]:
    opened = ReviewStore(tmp_path / "sextant.duckdb")
    yield opened
    opened.close()


def three_items(store: ReviewStore, clock: FakeClock) -> None:
    store.pack(clock.now())
    for trace in (A, B, C):
        store.review(clock.now(), trace)
        clock.advance(1)


def test_two_reviewers_asking_for_the_next_item_never_get_the_same_one(store: ReviewStore):
    clock = FakeClock()
    three_items(store, clock)
    desk = desk_over(store, clock)
    got: dict[str, str] = {}

    def ask(who: str) -> None:
        item = desk.claim_next(who, Filters())
        assert item is not None
        got[who] = item["trace_id"]

    threads = [threading.Thread(target=ask, args=(who,)) for who in ("ana", "bo")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert sorted(got.values()) == [A, B]  # the two oldest, one each
    claims = store.rows("SELECT trace_id, reviewer FROM review_claims ORDER BY trace_id")
    assert {(c["trace_id"], c["reviewer"]) for c in claims} == {
        (got["ana"], "ana"),
        (got["bo"], "bo"),
    }
    # asking again gives each the item they hold, not another
    assert desk.claim_next("ana", Filters())["trace_id"] == got["ana"]
    with pytest.raises(Held, match="bo is reviewing this item"):
        desk.label("ana", (got["bo"], *RULE), "pass", "")


def test_a_claim_expires_and_the_item_goes_to_the_next_reviewer(store: ReviewStore):
    clock = FakeClock()
    three_items(store, clock)
    desk = desk_over(store, clock, claim_seconds=900)
    assert desk.claim_next("ana", Filters())["trace_id"] == A
    clock.advance(600)
    assert desk.claim_next("bo", Filters())["trace_id"] == B
    clock.advance(299)
    assert desk.claim_next("cy", Filters())["trace_id"] == C
    clock.advance(2)  # ana's claim on A ended
    [held] = [q for q in desk.database.read(queues, clock.now())]
    assert (held["queue"], held["waiting"], held["claimed"]) == ("agent-security", 3, 2)
    assert desk.claim_next("dee", Filters())["trace_id"] == A
    assert desk.label("dee", (A, *RULE), "pass", "")["reviewer"] == "dee"


def test_a_label_is_the_answered_results_row_with_the_reviewers_verdict(store: ReviewStore):
    clock = FakeClock()
    three_items(store, clock)
    desk = desk_over(store, clock)
    item = desk.claim_next("ana", Filters())
    clock.advance(30)
    desk.label("ana", (A, *RULE), "fail", "  calls an MCP server nobody approved  ")
    [answered] = store.rows("SELECT * FROM results WHERE trace_id = ? AND source IS NULL", [A])
    [label] = store.rows("SELECT * FROM results WHERE trace_id = ? AND source = 'human'", [A])
    same = ("trace_id", "revision", "pack", "pack_version", "pack_sha256", "rule_id",
            "rule_type", "service_name", "agent_name", "service_version",
            "evidence_span_ids")  # fmt: skip
    assert {k: label[k] for k in same} == {k: answered[k] for k in same}
    assert (label["origin"], label["scope"], label["reviewer"]) == ("live", "trajectory", "ana")
    assert (label["verdict"], label["reason"]) == ("fail", "human_fail")
    assert label["message"] == "calls an MCP server nobody approved"
    assert label["evaluated_at"] == clock.now()
    assert label["requested_decision"] == "QUARANTINE"  # the rule's on_fail
    assert orjson.loads(label["details"]) == {
        "answers": {
            "verdict": "review",
            "reason": "mcp_server_unknown",
            "evaluated_at": item["evaluated_at"].isoformat() + "Z",
        }
    }
    # answered: off the queue, its claim let go, and no second label
    assert [i["trace_id"] for i in desk.database.read(_open, clock.now())] == [B, C]
    [claim] = store.rows("SELECT expires_at FROM review_claims WHERE trace_id = ?", [A])
    assert claim["expires_at"] == clock.now()
    with pytest.raises(Gone):
        desk.label("bo", (A, *RULE), "pass", "")
    # the `failures` view of the SQL endpoint: the person's fail, no longer the review
    failing = store.rows("SELECT verdict, reason FROM failures WHERE trace_id = ?", [A])
    assert failing == [{"verdict": "fail", "reason": "human_fail"}]


def test_pass_and_not_applicable_labels_and_their_reasons(store: ReviewStore):
    clock = FakeClock()
    three_items(store, clock)
    desk = desk_over(store, clock)
    desk.label("ana", (A, *RULE), "pass", "")
    desk.label("ana", (B, *RULE), "n.a.", "no MCP server in this run after all")
    labels = store.rows(
        "SELECT trace_id, verdict, reason, requested_decision FROM results"
        " WHERE source = 'human' ORDER BY trace_id"
    )
    assert [(r["verdict"], r["reason"], r["requested_decision"]) for r in labels] == [
        ("pass", "human_pass", None),
        ("not_applicable", "human_not_applicable", None),
    ]
    with pytest.raises(Exception, match="verdict is one of pass, fail, not_applicable"):
        desk.label("ana", (C, *RULE), "maybe", "")


def test_an_anonymous_reviewer_cannot_claim_or_label(store: ReviewStore):
    clock = FakeClock()
    three_items(store, clock)
    desk = desk_over(store, clock)
    with pytest.raises(Anonymous, match=r"give your token a name in auth\.tokens"):
        desk.claim_next("", Filters())
    with pytest.raises(Anonymous):
        desk.label("", (A, *RULE), "pass", "")
    assert store.rows("SELECT * FROM results WHERE source = 'human'") == []


def test_next_and_previous_move_along_the_queue_and_let_the_skipped_item_go(store: ReviewStore):
    clock = FakeClock()
    three_items(store, clock)
    desk = desk_over(store, clock)
    first = desk.claim_next("ana", Filters())
    assert desk.claim_next("bo", Filters())["trace_id"] == B
    third = desk.claim_next("ana", Filters(), after=first)
    assert third["trace_id"] == C  # B is bo's
    assert desk.item((A, *RULE))["claimed_by"] is None  # skipped, so free for others
    assert desk.claim_next("ana", Filters(), after=third, backwards=True)["trace_id"] == A
    assert desk.claim_next("ana", Filters(), after=desk.item((A, *RULE)), backwards=True) is None


def test_a_new_revision_and_filters_choose_the_items(store: ReviewStore):
    clock = FakeClock()
    three_items(store, clock)
    store.pack(clock.now(), name="other", owner="someone-else")
    desk = desk_over(store, clock)
    clock.advance(3600)

    def selected(**given: str) -> list[str]:
        found = desk.database.read(_open, clock.now(), Filters.parse(given))
        return [i["trace_id"] for i in found]

    assert selected(age="30m") == []
    assert selected(age="2h") == [A, B, C]
    assert selected(queue="agent-security") == [A, B, C]
    assert selected(queue="someone-else") == []
    assert selected(target="support-desk/support-agent") == [A, B, C]
    assert selected(target="support-desk/other-agent") == []
    assert selected(rule="known-mcp-servers", reason="mcp_server_unknown") == [A, B, C]
    with pytest.raises(Exception, match="target: SERVICE"):
        Filters.parse({"target": "a/b/c/d"})
    # a rebuilt run: its first revision's REVIEW is no longer an item
    store.insert("trajectories", trace_id=A, revision=2, is_current=True, closed_at=clock.now())
    assert selected() == [B, C]


def _open(cursor, now, filters: Filters | None = None):
    return items(cursor, filters or Filters(), now)
