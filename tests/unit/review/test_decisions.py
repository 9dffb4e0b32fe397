"""Labels as verdicts in the decision engine: a person's pass clears the REVIEW it answers, a
person's fail decides what the rule's failure would, naming who said so."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from collector.clock import FakeClock
from collector.config.decisions import DecisionsConfig
from collector.decisions.conditions import Coverage
from collector.decisions.engine import DecisionEngine
from collector.decisions.metrics import DecisionMetrics
from collector.decisions.state import State
from collector.lifecycle import deadline_in
from collector.review.queue import Filters
from evaluators.base import Decision
from tests.support.review import MCP_PACK, SUPPORT, Packs, ReviewStore, desk_over

A, B = ("a" * 32, "b" * 32)
RULE = ("support-mcp", "known-mcp-servers")
CONFIG = DecisionsConfig(
    interval_seconds=3600,  # the test calls evaluate()
    window_seconds=600,
    resolve_after_seconds=60,
)
POLICY_PACK = (
    MCP_PACK
    + """
decisions:
  - id: people-say-unsafe
    decision: ROLLBACK
    when: {reason: human_fail}
"""
)


@pytest.fixture
def store(tmp_path: Path) -> Iterator[ReviewStore]:
    opened = ReviewStore(tmp_path / "sextant.duckdb")
    yield opened
    opened.close()


def engine_over(store: ReviewStore, clock: FakeClock, packs: Packs) -> DecisionEngine:
    engine = DecisionEngine(
        CONFIG, store.database, store.writer, packs, DecisionMetrics(CollectorRegistry()),
        clock, Coverage(),
    )  # fmt: skip
    store.writer.on_commit = engine.consume  # as the pipeline hands it every commit
    engine.start()
    return engine


def wakeups(engine: DecisionEngine) -> float:
    [metric] = engine.metrics.wakeups.collect()
    return next(s.value for s in metric.samples if s.name.endswith("_total"))


def firing(engine: DecisionEngine) -> dict[Decision, object]:
    return {
        s.key.decision: s
        for s in engine.snapshot().states
        if s.key.target == SUPPORT and s.state == State.FIRING
    }


def test_passes_clear_the_review_and_a_fail_quarantines_as_the_rule_asks(store: ReviewStore):
    clock = FakeClock()
    store.pack(clock.now())
    store.review(clock.now(), A)
    store.review(clock.now(), B)
    engine = engine_over(store, clock, Packs())
    desk = desk_over(store, clock)
    try:
        engine.evaluate()
        assert set(firing(engine)) == {Decision.REVIEW}

        clock.advance(5)
        woken = wakeups(engine)
        desk.label("ana", (A, *RULE), "pass", "a CRM call, fine")
        assert wakeups(engine) == woken + 1  # a label starts the next round at once
        engine.evaluate()
        assert set(firing(engine)) == {Decision.REVIEW}  # B still waits

        clock.advance(5)
        item = desk.claim_next("bo", Filters())
        assert item["trace_id"] == B
        desk.label("bo", (B, *RULE), "fail", "an MCP server nobody approved")
        engine.evaluate()
        fired = firing(engine)
        quarantine = fired[Decision.QUARANTINE]
        assert quarantine.finding.reasons == ("human_fail",)
        assert quarantine.finding.evidence == (B,)
        assert quarantine.finding.summary == "labelled fail in review by bo"
        clock.advance(61)  # the REVIEW's condition has been clear for resolve_after
        engine.evaluate()
        assert set(firing(engine)) == {Decision.QUARANTINE}
    finally:
        engine.shutdown(deadline_in(5))


def test_not_applicable_clears_and_a_policy_on_human_fails_decides(store: ReviewStore):
    clock = FakeClock()
    store.pack(clock.now())
    store.review(clock.now(), A)
    store.review(clock.now(), B)
    engine = engine_over(store, clock, Packs({"support-mcp": POLICY_PACK}))
    desk = desk_over(store, clock)
    try:
        desk.label("ana", (A, *RULE), "not_applicable", "")
        desk.label("ana", (B, *RULE), "fail", "")
        engine.evaluate()
        clock.advance(61)
        engine.evaluate()
        fired = firing(engine)
        assert set(fired) == {Decision.ROLLBACK}
        assert fired[Decision.ROLLBACK].key.policy == "support-mcp/people-say-unsafe"
        assert fired[Decision.ROLLBACK].finding.summary == "labelled fail in review by ana"
    finally:
        engine.shutdown(deadline_in(5))


def test_the_latest_label_of_an_item_wins(store: ReviewStore):
    """A later label (a second look) replaces the first: its fail no longer decides."""
    clock = FakeClock()
    store.pack(clock.now())
    store.review(clock.now(), A)
    engine = engine_over(store, clock, Packs())
    desk = desk_over(store, clock)
    try:
        first = desk.label("ana", (A, *RULE), "fail", "")
        engine.evaluate()
        assert set(firing(engine)) == {Decision.QUARANTINE}
        clock.advance(5)
        store.insert("results", **{**first, "verdict": "pass", "reason": "human_pass",
                                   "requested_decision": None, "reviewer": "bo",
                                   "evaluated_at": clock.now()})  # fmt: skip
        clock.advance(61)
        engine.evaluate()
        assert firing(engine) == {}
    finally:
        engine.shutdown(deadline_in(5))
