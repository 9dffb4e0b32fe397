"""A review item left unanswered past its pack's review.sla raises its target's decision, with
the pack's owner and the waiting runs as evidence, and clears once a person labels them: the
decision engine over a real DuckDB file, stepped by a fake clock."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from collector.clock import FakeClock
from collector.config.decisions import DecisionsConfig
from collector.config.writer import WriterConfig
from collector.decisions.engine import DecisionEngine
from collector.decisions.metrics import DecisionMetrics
from collector.decisions.state import DecisionState, State
from collector.evaluation.packs import PackText
from collector.lifecycle import deadline_in
from collector.review.backlog_metrics import ReviewBacklogCollector
from collector.store.database import Database
from collector.store.metrics import StoreMetrics
from collector.store.writer import Writer
from collector.targets import Target
from evaluators.base import Decision
from tests.support.review_backlog import human_label, review_row, run_row, store

PACK = """
name: refunds
version: "1.0.0"
owner: refunds-reviewers
{review}
rules:
  - id: same-customer
    type: consistency
    step: {{kind: tool}}
    attribute: enduser.id
    reason: customer_mismatch
"""
DESK = Target("support-desk", "support-agent", "2.3.1")
SHOP = Target("shop-api", "checkout-agent", "1.2.0")
POLICY = "refunds/review_backlog"
CONFIG = DecisionsConfig(
    interval_seconds=3600, window_seconds=600, resolve_after_seconds=120, review_backlog_seconds=0
)


@dataclass
class Packs:
    text: str

    def snapshot(self) -> tuple[PackText, ...]:
        sha = hashlib.sha256(self.text.encode()).hexdigest()
        return (PackText("refunds", sha, self.text),)


@dataclass
class Deciding:
    engine: DecisionEngine
    writer: Writer
    clock: FakeClock
    registry: CollectorRegistry

    def backlog(self) -> dict[Target, DecisionState]:
        """The review backlog decisions by target, after one round."""
        self.engine.evaluate()
        return {s.key.target: s for s in self.engine.snapshot().states if s.key.policy == POLICY}

    def gauge(self, name: str) -> float | None:
        labels = {"owner": "refunds-reviewers", "pack": "refunds"}
        return self.registry.get_sample_value(name, labels)


@pytest.fixture
def deciding(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Deciding]:
    review = getattr(request, "param", "review: {sla: 1h}")
    database = Database(tmp_path / "sextant.duckdb")
    database.open()
    writer = Writer(database, WriterConfig(), StoreMetrics(CollectorRegistry()))
    writer.start()
    clock = FakeClock()
    registry = CollectorRegistry()
    engine = DecisionEngine(
        CONFIG,
        database,
        writer,
        Packs(PACK.format(review=review)),
        DecisionMetrics(registry),
        clock,
    )
    registry.register(ReviewBacklogCollector(lambda: engine.snapshot().review, clock))
    engine.start()
    yield Deciding(engine, writer, clock, registry)
    engine.shutdown(deadline_in(1))
    writer.shutdown(deadline_in(5))
    database.close()


def test_an_item_past_the_sla_fires_for_its_target_and_a_label_clears_it(deciding) -> None:
    clock, writer = deciding.clock, deciding.writer
    store(writer, "trajectories", run_row("a" * 32, DESK, clock.now()))
    item = review_row("a" * 32, DESK, clock.now())
    store(writer, "results", item)
    assert deciding.backlog() == {}
    assert deciding.gauge("sextant_review_queue_items") == 1.0
    assert deciding.gauge("sextant_review_sla_seconds") == 3600.0
    clock.advance(3599)
    assert deciding.backlog() == {}  # within the SLA
    assert deciding.gauge("sextant_review_oldest_item_seconds") == 3599.0
    store(writer, "trajectories", run_row("b" * 32, SHOP, clock.now()))
    store(writer, "results", review_row("b" * 32, SHOP, clock.now()))
    clock.advance(2)
    state = deciding.backlog()[DESK]
    assert (state.key.decision, state.state) == (Decision.REVIEW, State.FIRING)
    assert state.finding.reasons == ("coverage_lost_review_backlog",)
    assert state.finding.owner == "refunds-reviewers"
    assert state.finding.evidence == ("a" * 32,)
    assert state.finding.rules == ("refunds/same-customer",)
    assert "1 review item(s) of pack refunds" in state.finding.summary
    assert "review.sla (1h)" in state.finding.summary
    decision, reasons = deciding.engine.snapshot().decision_of(DESK)
    assert decision == Decision.REVIEW and "coverage_lost_review_backlog" in reasons
    assert SHOP not in deciding.backlog()  # its run has waited 2 s: only the overdue target
    assert deciding.gauge("sextant_review_queue_items") == 2.0

    store(writer, "results", human_label(item, "pass", "ana", clock.now(), "customer verified"))
    clock.advance(1)
    assert deciding.backlog()[DESK].state == State.FIRING  # clear, for its resolve_after
    assert deciding.gauge("sextant_review_queue_items") == 1.0  # the shop run's
    assert deciding.gauge("sextant_review_oldest_item_seconds") == 3.0
    clock.advance(CONFIG.resolve_after_seconds)
    assert deciding.backlog() == {}
    _, reasons = deciding.engine.snapshot().decision_of(DESK)
    assert "coverage_lost_review_backlog" not in reasons


@pytest.mark.parametrize("deciding", ["review: {sla: 30m, decision: FAIL}"], indirect=True)
def test_a_pack_may_make_an_overdue_review_a_failure(deciding) -> None:
    clock = deciding.clock
    store(deciding.writer, "trajectories", run_row("a" * 32, DESK, clock.now()))
    store(deciding.writer, "results", review_row("a" * 32, DESK, clock.now()))
    clock.advance(1801)
    state = deciding.backlog()[DESK]
    assert state.key.decision == Decision.FAIL
    assert deciding.engine.snapshot().decision_of(DESK)[0] == Decision.FAIL


@pytest.mark.parametrize("deciding", [""], indirect=True)
def test_without_an_sla_a_backlog_is_counted_but_decides_nothing(deciding) -> None:
    clock = deciding.clock
    store(deciding.writer, "trajectories", run_row("a" * 32, DESK, clock.now()))
    store(deciding.writer, "results", review_row("a" * 32, DESK, clock.now()))
    clock.advance(timedelta(days=30).total_seconds())
    assert deciding.backlog() == {}
    assert deciding.gauge("sextant_review_queue_items") == 1.0
    assert deciding.gauge("sextant_review_oldest_item_seconds") == 30 * 86400.0
    assert deciding.gauge("sextant_review_sla_seconds") is None


def test_a_new_overdue_item_adds_its_run_to_the_firing_decision(deciding) -> None:
    clock, writer = deciding.clock, deciding.writer
    store(writer, "trajectories", run_row("a" * 32, DESK, clock.now()))
    store(writer, "results", review_row("a" * 32, DESK, clock.now()))
    clock.advance(1800)
    store(writer, "trajectories", run_row("b" * 32, DESK, clock.now()))
    store(writer, "results", review_row("b" * 32, DESK, clock.now()))
    clock.advance(1801)
    assert deciding.backlog()[DESK].finding.evidence == ("a" * 32,)
    clock.advance(1800)
    state = deciding.backlog()[DESK]
    assert set(state.finding.evidence) == {"a" * 32, "b" * 32}
    assert "2 review item(s)" in state.finding.summary
