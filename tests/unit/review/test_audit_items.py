"""Audit items over a real store: pass and fail results a pack sampled wait in its owner's queue
after the REVIEW items, are labelled the same way, count in decisions as the contract says (a
person's fail is a fail; a person's pass leaves the rule's fail in force), and stay out of the
review.sla backlog while the queue metrics count them apart."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path

import orjson
import pytest
from prometheus_client import CollectorRegistry

from collector.clock import FakeClock
from collector.config.decisions import DecisionsConfig
from collector.decisions.conditions import Coverage
from collector.decisions.engine import DecisionEngine
from collector.decisions.metrics import DecisionMetrics
from collector.decisions.state import State
from collector.errors import PermanentError
from collector.evaluation.results import trajectory_result_rows
from collector.lifecycle import deadline_in
from collector.review.backlog import BacklogReader, audits, pending, queues
from collector.review.backlog_metrics import ReviewBacklogCollector
from collector.review.queue import Filters, items
from collector.review.queue import queues as queue_counts
from evaluators.base import Decision
from evaluators.evaluate import evaluate_pack
from evaluators.rulepack import load_text
from tests.support.review import MCP_PACK, SUPPORT, Packs, ReviewStore, desk_over
from tests.support.trajectories import run, tool

A, B, C, D = ("a" * 32, "b" * 32, "c" * 32, "d" * 32)
RULE = ("support-mcp", "known-mcp-servers")
AUDITED_PACK = MCP_PACK + "review: {sla: 1h, audit: {sample: 0.05}}\n"


@pytest.fixture
def store(tmp_path: Path) -> Iterator[ReviewStore]:
    opened = ReviewStore(tmp_path / "sextant.duckdb")
    yield opened
    opened.close()


def a_queue(store: ReviewStore, clock: FakeClock) -> None:
    """B and C were sampled for audit (a pass, a fail), D passed unsampled, then A asked for a
    review: A comes first all the same."""
    store.pack(clock.now())
    store.review(clock.now(), B, verdict="pass", audit=True)
    clock.advance(1)
    store.review(clock.now(), C, verdict="fail", audit=True)
    store.review(clock.now(), D, verdict="pass")
    clock.advance(1)
    store.review(clock.now(), A)
    clock.advance(1)


def listed(store: ReviewStore, clock: FakeClock, **given: str) -> list[tuple[str, str, str]]:
    found = store.database.read(items, Filters.parse(given), clock.now())
    return [(i["trace_id"], i["kind"], i["verdict"]) for i in found]


def test_audits_wait_after_the_reviews_and_a_filter_picks_them(store: ReviewStore) -> None:
    clock = FakeClock()
    a_queue(store, clock)
    assert listed(store, clock) == [
        (A, "review", "review"),
        (B, "audit", "pass"),
        (C, "audit", "fail"),
    ]
    assert listed(store, clock, kind="audit") == [(B, "audit", "pass"), (C, "audit", "fail")]
    assert listed(store, clock, kind="review") == [(A, "review", "review")]
    [counted] = store.database.read(queue_counts, clock.now())
    assert (counted["queue"], counted["waiting"], counted["audit"]) == ("agent-security", 3, 2)
    with pytest.raises(PermanentError, match="kind: review or audit, not 'maybe'"):
        Filters.parse({"kind": "maybe"})


def test_an_audit_is_claimed_and_labelled_like_a_review(store: ReviewStore) -> None:
    clock = FakeClock()
    a_queue(store, clock)
    desk = desk_over(store, clock)
    assert desk.claim_next("ana", Filters())["trace_id"] == A
    nxt = desk.claim_next("ana", Filters(), desk.item((A, *RULE)))
    assert (nxt["trace_id"], nxt["kind"]) == (B, "audit")
    back = desk.claim_next("ana", Filters(), desk.item((B, *RULE)), backwards=True)
    assert back["trace_id"] == A  # previous goes back across the kinds
    label = desk.label("ana", (B, *RULE), "fail", "looked fine to the rule, not to me")
    assert (label["verdict"], label["reason"], label["requested_decision"]) == (
        "fail",
        "human_fail",
        "QUARANTINE",  # the rule's on_fail
    )
    answers = orjson.loads(label["details"])["answers"]
    assert (answers["verdict"], answers["reason"]) == ("pass", None)
    assert (label["source"], label["reviewer"]) == ("human", "ana")
    assert listed(store, clock) == [(A, "review", "review"), (C, "audit", "fail")]
    stored = store.rows("SELECT verdict, audit FROM results WHERE source = 'human'")
    assert stored == [{"verdict": "fail", "audit": None}]  # a label is never an item itself


def test_audits_stay_out_of_the_backlog_and_are_counted_apart(store: ReviewStore) -> None:
    clock = FakeClock()
    a_queue(store, clock)
    clock.advance(2 * 3600)  # every item older than the SLA
    cursor = store.database.cursor()
    try:
        [waiting] = pending(cursor, clock.now(), {"support-mcp": 3600.0})
        assert (waiting.items, waiting.overdue, waiting.traces) == (1, 1, (A,))
        [audited] = audits(cursor)
        assert (audited.pack, audited.recorded_owner, audited.items) == ("support-mcp", "", 2)
        reader = BacklogReader(every=0)
        assert reader.read_audits(cursor, clock.now()) == [audited]
    finally:
        cursor.close()
    shown = queues([waiting], {"support-mcp": "agent-security"}, {"support-mcp": 3600.0}, [audited])
    queue = shown[("agent-security", "support-mcp")]
    assert (queue.items, queue.audits, queue.oldest) == (1, 2, waiting.oldest)

    registry = CollectorRegistry()
    registry.register(ReviewBacklogCollector(lambda: shown, clock))
    labels = {"owner": "agent-security", "pack": "support-mcp"}
    assert registry.get_sample_value("sextant_review_queue_items", labels) == 1.0
    assert registry.get_sample_value("sextant_review_audit_items", labels) == 2.0

    desk = desk_over(store, clock)
    desk.label("ana", (C, *RULE), "pass", "")
    cursor = store.database.cursor()
    try:
        assert [a.items for a in audits(cursor)] == [1]
        later = BacklogReader(every=0)
        later.read_audits(cursor, clock.now())
        clock.advance(1)
        # read again from shortly before the oldest audit still waiting: B, still there
        assert [a.items for a in later.read_audits(cursor, clock.now())] == [1]
    finally:
        cursor.close()


def engine_over(store: ReviewStore, clock: FakeClock) -> DecisionEngine:
    config = DecisionsConfig(interval_seconds=3600, window_seconds=600, resolve_after_seconds=60)
    engine = DecisionEngine(
        config, store.database, store.writer, Packs({"support-mcp": AUDITED_PACK}),
        DecisionMetrics(CollectorRegistry()), clock, Coverage(),
    )  # fmt: skip
    engine.start()
    return engine


def firing(engine: DecisionEngine) -> dict[Decision, object]:
    return {
        s.key.decision: s
        for s in engine.snapshot().states
        if s.key.target == SUPPORT and s.state == State.FIRING
    }


def test_a_persons_fail_on_a_pass_decides_and_their_pass_leaves_a_fail(store: ReviewStore):
    clock = FakeClock()
    store.pack(clock.now())
    store.review(clock.now(), B, verdict="pass", audit=True)
    engine = engine_over(store, clock)
    desk = desk_over(store, clock)
    try:
        engine.evaluate()
        assert firing(engine) == {}  # a pass waiting for audit decides nothing, nor is overdue
        clock.advance(3 * 3600)
        engine.evaluate()
        assert firing(engine) == {}
        assert engine.snapshot().review[("agent-security", "support-mcp")].audits == 1

        desk.label("bo", (B, *RULE), "fail", "the rule missed an unknown server")
        engine.evaluate()
        quarantine = firing(engine)[Decision.QUARANTINE]
        assert quarantine.finding.reasons == ("human_fail",)
        assert quarantine.finding.evidence == (B,)
        assert quarantine.finding.summary == "labelled fail in review by bo"

        # A machine fail sampled for audit, labelled pass: the fail stays in force.
        clock.advance(5)
        store.review(clock.now(), C, verdict="fail", audit=True, reason="mcp_server_not_allowed")
        engine.evaluate()
        desk.label("bo", (C, *RULE), "pass", "a server we know under another name")
        clock.advance(timedelta(minutes=2).total_seconds())
        engine.evaluate()
        evidence = firing(engine)[Decision.QUARANTINE].finding.evidence
        assert C in evidence
    finally:
        engine.shutdown(deadline_in(5))


PRESENCE_PACK = """
name: support
version: "1.0.0"
owner: support-sre
review: {audit: {sample: 1.0}}
rules:
  - {id: looks-up, type: presence, reason: no_lookup, step: {kind: tool, name: lookup_customer}}
"""


def test_the_mark_is_stored_on_live_rows_only() -> None:
    """A replay re-evaluates stored runs: its results are never items of anyone's queue."""
    t = run(tool(1, "lookup_customer"))
    [result] = evaluate_pack(t, load_text(PRESENCE_PACK, "support.yaml").pack)
    assert (result.verdict.value, result.audit) == ("pass", True)
    at = datetime(2025, 6, 1)
    [live] = trajectory_result_rows(t, [result], {}, at)
    [replayed] = trajectory_result_rows(t, [result], {}, at, "replay-1")
    assert (live["audit"], replayed["audit"]) == (True, None)
