"""The decision engine over a real DuckDB file, stepped by a fake clock: no sleeping, no server."""

from __future__ import annotations

import hashlib
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

import pyarrow as pa
import pytest
from prometheus_client import CollectorRegistry

from collector.clock import Clock, FakeClock, SystemClock
from collector.config.decisions import DecisionsConfig
from collector.config.writer import WriterConfig
from collector.decisions import queries
from collector.decisions.conditions import Coverage
from collector.decisions.engine import DecisionEngine
from collector.decisions.metrics import DecisionMetrics
from collector.decisions.state import (
    COLLECTOR_TARGET,
    EVERY_TARGET,
    DecisionState,
    Event,
    State,
    service_scope,
)
from collector.evaluation.packs import PackText
from collector.lifecycle import deadline_in
from collector.store.database import Database
from collector.store.metrics import StoreMetrics
from collector.store.pending import fan_out
from collector.store.tables import ARROW_SCHEMAS
from collector.store.writer import Writer
from collector.targets import Target
from evaluators.base import Decision
from tests.support.wait import wait_for

PACK = """
name: shop
version: "1.0.0"
owner: shop-oncall
rules:
  - id: approval-before-refund
    type: precedes
    before: {name: request_approval}
    then: {kind: tool, name: "refund_*"}
    reason: approval_boundary_violation
    severity: critical
    on_fail: QUARANTINE
decisions:
  - id: quarantine-unsafe-refunds
    decision: QUARANTINE
    when: {reason: approval_boundary_violation}
    count: 2
    window: 10m
    for: 1m
    resolve_after: 2m
"""
POLICY = "shop/quarantine-unsafe-refunds"
CHECKOUT = Target("shop-api", "checkout-agent", "1.2.0")
RETURNS = Target("shop-api", "returns-agent", "0.9.0")
CONFIG = DecisionsConfig(
    interval_seconds=3600,  # the ticker never fires on its own: the test calls evaluate()
    window_seconds=600,
    resolve_after_seconds=120,
    max_eval_backlog=100,
)


@dataclass
class Packs:
    texts: dict[str, str] = field(default_factory=lambda: {"shop": PACK})

    def snapshot(self) -> tuple[PackText, ...]:
        return tuple(
            PackText(name, hashlib.sha256(text.encode()).hexdigest(), text)
            for name, text in self.texts.items()
        )


@dataclass
class Notifier:
    sent: list[tuple[str, State, Event]] = field(default_factory=list)
    channels_failing: list[str] = field(default_factory=list)
    sent_at: list[float] = field(default_factory=list)  # monotonic, in real time
    cond: threading.Condition = field(default_factory=threading.Condition)

    def notify(self, state: DecisionState, event: Event) -> None:
        with self.cond:
            self.sent.append((state.id, state.state, event))
            self.sent_at.append(time.monotonic())
            self.cond.notify_all()

    def wait_sent(self, count: int, timeout: float) -> float:
        """When the `count`th notification was sent; fails at the deadline."""
        with self.cond:
            assert self.cond.wait_for(lambda: len(self.sent) >= count, timeout), self.sent
            return self.sent_at[count - 1]

    def failing(self) -> list[str]:
        return list(self.channels_failing)


@dataclass
class Counts:
    rejected: dict[str, float] = field(default_factory=dict)  # by sending service
    backlog: int = 0


class Store:
    """A DuckDB file and its writer, closed and opened again for a restart."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.open()

    def open(self) -> None:
        self.database = Database(self.path)
        self.database.open()
        self.writer = Writer(self.database, WriterConfig(), StoreMetrics(CollectorRegistry()))
        self.writer.start()

    def close(self) -> None:
        self.writer.shutdown(deadline_in(5))
        self.database.close()

    def insert(self, table: str, **row: object) -> None:
        data = pa.Table.from_pylist([row], schema=ARROW_SCHEMAS[table])
        self.writer.submit_tables({table: data}).result(5)

    def run(self, now: datetime, trace_id: str, target: Target, failed: bool = True) -> None:
        """One closed agent run of the target and, when it failed, its approval result."""
        where = {
            "service_name": target.service,
            "agent_name": target.agent,
            "service_version": target.version,
        }
        self.insert(
            "trajectories",
            trace_id=trace_id,
            revision=1,
            is_current=True,
            agent_run=True,
            incomplete_reasons=[],
            closed_at=now,
            **where,
        )
        if failed:
            self.failure(now, trace_id, target, "critical", requested_decision="QUARANTINE")

    def failure(
        self,
        now: datetime,
        trace_id: str,
        target: Target,
        severity: str,
        pack: str = "shop",
        rule_id: str = "approval-before-refund",
        reason: str = "approval_boundary_violation",
        verdict: str = "fail",
        origin: str = "live",
        **extra: object,
    ) -> None:
        """The run's failed result (by default its approval result), at this severity."""
        self.insert(
            "results",
            trace_id=trace_id,
            revision=1,
            pack=pack,
            pack_version="1.0.0",
            rule_id=rule_id,
            rule_type="precedes",
            verdict=verdict,
            severity=severity,
            reason=reason,
            evaluated_at=now,
            scope="trajectory",
            origin=origin,
            service_name=target.service,
            agent_name=target.agent,
            service_version=target.version,
            **extra,
        )

    def history(self, decision_id: str) -> list[tuple[str, str, str | None]]:
        cursor = self.database.cursor()
        try:
            sql = "SELECT event, state, actor FROM decisions WHERE decision_id = ? ORDER BY seq"
            return cursor.execute(sql, [decision_id]).fetchall()
        finally:
            cursor.close()


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    opened = Store(tmp_path / "sextant.duckdb")
    yield opened
    opened.close()


def engine_over(
    store: Store,
    clock: Clock,
    notifier: Notifier,
    counts: Counts | None = None,
    packs: Packs | None = None,
) -> DecisionEngine:
    counts = counts or Counts()
    engine = DecisionEngine(
        CONFIG,
        store.database,
        store.writer,
        packs or Packs(),
        DecisionMetrics(CollectorRegistry()),
        clock,
        Coverage(rejected_spans=lambda: counts.rejected, eval_backlog=lambda: counts.backlog),
        notifier,
    )
    engine.start()
    return engine


def wakeups(engine: DecisionEngine) -> float:
    """Commits that woke the engine early."""
    [metric] = engine.metrics.wakeups.collect()
    return next(s.value for s in metric.samples if s.name.endswith("_total"))


def active(engine: DecisionEngine) -> dict[tuple[Target, Decision], DecisionState]:
    return {(s.key.target, s.key.decision): s for s in engine.snapshot().states}


def test_a_policy_goes_pending_then_fires_after_for_and_resolves_after_resolve_after(store):
    clock, notifier = FakeClock(), Notifier()
    engine = engine_over(store, clock, notifier)
    try:
        t0 = clock.now()
        store.run(t0, "a" * 32, CHECKOUT)
        assert engine.evaluate() == []  # one run of the two the policy counts

        clock.advance(10)
        store.run(clock.now(), "b" * 32, CHECKOUT)
        [pending] = engine.evaluate()
        assert (pending.state, pending.events) == (State.PENDING, (Event.PENDING,))
        assert pending.key.policy == POLICY
        assert pending.finding.evidence == ("b" * 32, "a" * 32)  # the newest first
        assert notifier.sent == []  # pending never notifies

        clock.advance(30)
        assert engine.evaluate() == []  # still waiting for its `for` (1m)
        clock.advance(30)
        [fired] = engine.evaluate()
        assert (fired.id, fired.state, fired.events) == (pending.id, State.FIRING, (Event.FIRING,))
        assert notifier.sent == [(fired.id, State.FIRING, Event.FIRING)]
        assert engine.snapshot().decision_of(CHECKOUT)[0] == Decision.QUARANTINE

        # The first run leaves the 10m window at t0+10m: the condition clears, the decision
        # keeps firing for `resolve_after` (2m) from the last round that saw it.
        clock.advance(600 - 70)
        assert engine.evaluate() == []  # t0+10m: both runs still in the window
        clock.advance(10)
        assert engine.evaluate() == []  # clear, but only for 10s
        assert active(engine)[CHECKOUT, Decision.QUARANTINE].state == State.FIRING
        clock.advance(110)
        [resolved] = engine.evaluate()
        assert (resolved.id, resolved.state) == (pending.id, State.RESOLVED)
        assert resolved.resolved_at == clock.now()
        assert notifier.sent[-1] == (pending.id, State.RESOLVED, Event.RESOLVED)
        assert engine.snapshot().decision_of(CHECKOUT)[0] == Decision.PASS
    finally:
        engine.shutdown(deadline_in(1))
    assert store.history(pending.id) == [
        ("pending", "pending", "sextant"),
        ("firing", "firing", "sextant"),
        ("resolved", "resolved", "sextant"),
    ]


def test_a_restart_restores_pending_and_firing_decisions_with_their_ids_and_acks(store):
    clock, notifier = FakeClock(), Notifier()
    engine = engine_over(store, clock, notifier)
    store.run(clock.now(), "a" * 32, CHECKOUT)
    store.run(clock.now(), "b" * 32, CHECKOUT)
    engine.evaluate()
    clock.advance(60)
    [fired] = engine.evaluate()
    engine.acknowledge(fired.id, "ana", "looking at the refund prompt")
    store.run(clock.now(), "c" * 32, RETURNS)
    store.run(clock.now(), "d" * 32, RETURNS)
    [waiting] = engine.evaluate()
    assert waiting.state == State.PENDING
    engine.shutdown(deadline_in(1))
    store.close()

    clock.advance(5)
    store.open()
    notifier = Notifier()
    engine = engine_over(store, clock, notifier)
    try:
        restored = active(engine)
        firing = restored[CHECKOUT, Decision.QUARANTINE]
        assert (firing.id, firing.state) == (fired.id, State.FIRING)
        assert (firing.acked_by, firing.ack_note) == ("ana", "looking at the refund prompt")
        assert firing.finding.for_seconds == 60 and firing.finding.resolve_after == 120
        pending = restored[RETURNS, Decision.QUARANTINE]
        assert (pending.id, pending.state) == (waiting.id, State.PENDING)
        # Alertmanager forgets alerts that are not re-sent: the firing one goes out again.
        assert notifier.sent == [(fired.id, State.FIRING, Event.FIRING)]

        # The pending one keeps its start: it fires a minute after it began, not after restart.
        clock.advance(55)
        [fired_later] = engine.evaluate()
        assert (fired_later.id, fired_later.state) == (waiting.id, State.FIRING)
    finally:
        engine.shutdown(deadline_in(1))
    assert [event for event, _, _ in store.history(fired.id)] == ["pending", "firing", "ack"]
    assert store.history(fired.id)[-1][2] == "ana"


def test_lost_coverage_is_a_review_with_its_reason_for_the_targets_it_blinds(store):
    clock, notifier = FakeClock(), Notifier()
    counts = Counts(rejected={"shop-api": 7})
    engine = engine_over(store, clock, notifier, counts)
    billing = Target("billing", "invoice-agent", "3.0.0")
    try:
        store.run(clock.now(), "e" * 32, CHECKOUT, failed=False)
        assert engine.evaluate() == []  # spans rejected before the start are not counted
        assert engine.snapshot().decision_of(CHECKOUT) == (Decision.PASS, [])

        clock.advance(5)
        counts.rejected, counts.backlog = {"shop-api": 10, "": 2}, 101
        changed = {(s.key.target, s.key.policy): s for s in engine.evaluate()}
        shop = service_scope("shop-api")
        assert set(changed) == {
            (shop, "coverage/rejected_spans"),
            (COLLECTOR_TARGET, "coverage/rejected_spans"),
            (EVERY_TARGET, "coverage/eval_backlog"),
        }
        for state in changed.values():
            assert (state.key.decision, state.state) == (Decision.REVIEW, State.FIRING)
        rejected = changed[shop, "coverage/rejected_spans"].finding
        assert rejected.reasons == ("coverage_lost_rejected_spans",)
        assert "3 span(s) from service shop-api rejected" in rejected.summary
        unknown = changed[COLLECTOR_TARGET, "coverage/rejected_spans"].finding
        assert "2 span(s) or undecodable request(s) from no service" in unknown.summary
        backlog = changed[EVERY_TARGET, "coverage/eval_backlog"].finding
        assert backlog.reasons == ("coverage_lost_eval_backlog",)
        # No PASS for a target Sextant could not fully see: every target lost the backlog, only
        # the shop's targets lost their rejected spans.
        assert engine.snapshot().decision_of(CHECKOUT) == (
            Decision.REVIEW,
            ["coverage_lost_eval_backlog", "coverage_lost_rejected_spans"],
        )
        assert engine.snapshot().decision_of(billing) == (
            Decision.REVIEW,
            ["coverage_lost_eval_backlog"],
        )

        # The backlog drains and no more spans are rejected: both clear after resolve_after, the
        # rejections once they leave the window.
        counts.backlog = 0
        clock.advance(CONFIG.resolve_after_seconds)
        [cleared] = engine.evaluate()
        assert (cleared.key.policy, cleared.state) == ("coverage/eval_backlog", State.RESOLVED)
        assert engine.snapshot().decision_of(billing) == (Decision.PASS, [])
        clock.advance(CONFIG.window_seconds + CONFIG.resolve_after_seconds)
        engine.evaluate()
        assert engine.snapshot().states == []
    finally:
        engine.shutdown(deadline_in(1))


class ArrivingRejections:
    """Rejection counts (none from a known sender) that a round reads: `meanwhile` runs once, as
    the next read begins, for what happens while a round is under way."""

    backlog = 0

    def __init__(self) -> None:
        self.total = 0.0
        self.meanwhile: Callable[[], None] | None = None

    @property
    def rejected(self) -> dict[str, float]:
        if self.meanwhile is not None:
            happens, self.meanwhile = self.meanwhile, None
            happens()
        return {"": self.total}


def test_a_rejection_after_a_resolution_reopens_even_while_a_round_runs(store):
    clock, notifier = FakeClock(), Notifier()
    counts = ArrivingRejections()
    engine = engine_over(store, clock, notifier, counts)
    try:
        counts.total = 1
        [first] = engine.evaluate()
        assert (first.key.target, first.state) == (COLLECTOR_TARGET, State.FIRING)

        def resolved_then_rejected() -> None:
            clock.advance(1)
            engine.resolve(first.id, "ana", "")
            clock.advance(1)
            counts.total = 2  # a request refused after the resolution: new evidence

        counts.meanwhile = resolved_then_rejected
        clock.advance(1)
        engine.evaluate()
        clock.advance(1)
        engine.evaluate()
        [again] = [s for s in engine.snapshot().states if s.key.target == COLLECTOR_TARGET]
        assert again.id != first.id and again.state == State.FIRING
        assert "2 span(s) or undecodable request(s)" in again.finding.summary
    finally:
        engine.shutdown(deadline_in(1))


def test_failing_alert_delivery_and_incomplete_traces_lose_coverage(store):
    clock, notifier = FakeClock(), Notifier(channels_failing=["pager"])
    engine = engine_over(store, clock, notifier)
    try:
        now = clock.now()
        store.insert(
            "trajectories",
            trace_id="f" * 32,
            revision=1,
            is_current=True,
            agent_run=True,
            incomplete_reasons=["missing_parent"],
            closed_at=now,
            service_name=RETURNS.service,
            agent_name=RETURNS.agent,
            service_version=RETURNS.version,
        )
        changed = {(s.key.target, s.key.policy): s for s in engine.evaluate()}
        delivery = changed[EVERY_TARGET, "coverage/alert_delivery"]
        assert delivery.finding.reasons == ("alert_delivery_failing",)
        assert "pager" in delivery.finding.summary
        incomplete = changed[RETURNS, "coverage/incomplete_traces"]
        assert incomplete.finding.reasons == ("coverage_lost_incomplete_traces",)
        assert incomplete.finding.evidence == ("f" * 32,)
    finally:
        engine.shutdown(deadline_in(1))


def test_a_round_reads_one_snapshot_so_a_run_never_counts_without_its_evidence(store, monkeypatch):
    clock, notifier = FakeClock(), Notifier()
    engine = engine_over(store, clock, notifier)
    now = clock.now()
    # One run failing two result groups of the policy: its runs are counted distinct.
    store.run(now, "a" * 32, CHECKOUT)
    store.failure(now, "a" * 32, CHECKOUT, "high")
    real = queries.distinct_runs

    def with_a_commit_in_between(*args, **kwargs):  # the second run lands mid-round
        store.run(now, "b" * 32, CHECKOUT)
        monkeypatch.setattr(queries, "distinct_runs", real)
        return real(*args, **kwargs)

    monkeypatch.setattr(queries, "distinct_runs", with_a_commit_in_between)
    try:
        assert engine.evaluate() == []  # the round's snapshot holds one run
        [pending] = engine.evaluate()  # the next one sees both, with both as evidence
        assert set(pending.finding.evidence) == {"a" * 32, "b" * 32}
    finally:
        engine.shutdown(deadline_in(1))


SECURITY = """
name: security
version: "2.0.0"
owner: security-oncall
decisions:
  - id: disable-on-secret-leaks
    decision: DISABLE
    when: {rule: "default/secret-*"}
  - id: review-approvals-anywhere
    decision: REVIEW
    when: {pack: "*", reason: approval_boundary_violation}
"""


def test_a_policies_only_pack_decides_over_other_packs_with_its_own_owner(store):
    clock, notifier = FakeClock(), Notifier()
    packs = Packs({"shop": PACK, "security": SECURITY})
    engine = engine_over(store, clock, notifier, packs=packs)
    try:
        now = clock.now()
        store.run(now, "a" * 32, CHECKOUT, failed=False)
        store.failure(now, "a" * 32, CHECKOUT, "high", "default", "secret-in-output", "secret")
        store.failure(now, "a" * 32, CHECKOUT, "low", "default", "slow-answer", "too_slow")
        # Another pack's approval failures, twice: the shop's policy counts its own pack only.
        for trace_id in ("b" * 32, "c" * 32):
            store.run(now, trace_id, RETURNS, failed=False)
            store.failure(now, trace_id, RETURNS, "critical", pack="default")
        changed = {(s.key.target, s.key.policy): s for s in engine.evaluate()}
        assert set(changed) == {
            (CHECKOUT, "security/disable-on-secret-leaks"),
            (RETURNS, "security/review-approvals-anywhere"),
        }
        leak = changed[CHECKOUT, "security/disable-on-secret-leaks"]
        assert (leak.key.decision, leak.state) == (Decision.DISABLE, State.FIRING)
        assert leak.finding.owner == "security-oncall"
        assert leak.finding.rules == ("default/secret-in-output",)
        assert leak.finding.packs == ("default@1.0.0",)
        assert leak.finding.evidence == ("a" * 32,)
        review = changed[RETURNS, "security/review-approvals-anywhere"].finding
        assert review.reasons == ("approval_boundary_violation",)
        assert review.rules == ("default/approval-before-refund",)
        assert set(review.evidence) == {"b" * 32, "c" * 32}
    finally:
        engine.shutdown(deadline_in(1))


ON_FAIL_ONLY = PACK.split("decisions:")[0]  # the approval rule's on_fail, no policy: no `for`


class Commits:
    """The writer's commits, in real time, for a commit hook beside the engine's."""

    def __init__(self) -> None:
        self.at: list[float] = []
        self.results: list[float] = []

    def consume(self, tables: dict[str, pa.Table], received_at: datetime) -> None:
        self.at.append(time.monotonic())
        if "results" in tables:
            self.results.append(time.monotonic())


def test_a_stored_failing_result_fires_at_once_not_at_the_next_interval(store):
    clock, notifier, commits = FakeClock(), Notifier(), Commits()
    engine = engine_over(store, clock, notifier, packs=Packs({"shop": ON_FAIL_ONLY}))
    store.writer.on_commit = fan_out(commits.consume, engine.consume)
    try:
        # The interval is an hour and the fake clock stands still: only the commit can wake it.
        store.run(clock.now(), "a" * 32, CHECKOUT)
        # With the clock standing still and an hour's interval, firing at all is the commit's
        # doing; a wall-clock bound would only measure how busy the machine is.
        notifier.wait_sent(1, timeout=5)
        [(decision_id, state, event)] = notifier.sent
        assert (state, event) == (State.FIRING, Event.FIRING)
        assert engine.snapshot().decision_of(CHECKOUT)[0] == Decision.QUARANTINE
        assert wakeups(engine) == 1  # the trajectory's commit did not wake it
    finally:
        engine.shutdown(deadline_in(1))
    assert store.history(decision_id) == [("firing", "firing", "sextant")]


def test_a_policy_starts_its_for_at_once_and_passing_or_replayed_results_wake_nothing(store):
    clock, notifier, commits = FakeClock(), Notifier(), Commits()
    engine = engine_over(store, clock, notifier)
    store.writer.on_commit = fan_out(commits.consume, engine.consume)

    def pending() -> DecisionState | None:
        state = active(engine).get((CHECKOUT, Decision.QUARANTINE))
        return state if state is not None and state.state == State.PENDING else None

    try:
        store.run(clock.now(), "a" * 32, CHECKOUT, failed=False)
        store.failure(clock.now(), "a" * 32, CHECKOUT, "critical", verdict="pass")
        store.failure(clock.now(), "a" * 32, CHECKOUT, "critical", origin="replay", replay_id="r1")
        assert wakeups(engine) == 0  # counted in the writer, before the ack
        store.run(clock.now(), "b" * 32, CHECKOUT)
        clock.advance(1)  # newest evidence first; far from the interval (an hour)
        store.run(clock.now(), "c" * 32, CHECKOUT)  # the policy's count: 2
        started = wait_for(pending, timeout=5, interval=0.002)  # the clock stands still
        assert started.finding.evidence == ("c" * 32, "b" * 32)
        assert notifier.sent == []  # pending never notifies; its `for` is the interval's work
        assert wakeups(engine) == 2
    finally:
        engine.shutdown(deadline_in(1))


def test_the_next_round_comes_when_a_pending_decisions_for_ends_if_before_the_interval(store):
    clock, notifier = FakeClock(), Notifier()
    engine = engine_over(store, clock, notifier)
    try:
        assert engine.next_round_in() == CONFIG.interval_seconds
        for trace_id in ("a" * 32, "b" * 32):
            store.run(clock.now(), trace_id, CHECKOUT)
        [pending] = engine.evaluate()
        assert pending.state == State.PENDING
        clock.advance(45)
        assert engine.next_round_in() == 15  # the policy's `for` is 1m
        clock.advance(20)
        assert engine.next_round_in() == CONFIG.wake_gap_seconds  # overdue: at once, no spin
        [fired] = engine.evaluate()
        assert fired.state == State.FIRING
        assert engine.next_round_in() == CONFIG.interval_seconds
    finally:
        engine.shutdown(deadline_in(1))


def test_a_pending_decision_fires_when_its_for_ends_in_real_time(store):
    notifier, commits = Notifier(), Commits()
    short_for = PACK.replace("count: 2", "count: 1").replace("for: 1m", "for: 0.3s")
    engine = engine_over(store, SystemClock(), notifier, packs=Packs({"shop": short_for}))
    store.writer.on_commit = fan_out(commits.consume, engine.consume)
    try:
        store.run(engine.now(), "a" * 32, CHECKOUT)
        fired = notifier.wait_sent(1, timeout=5)
        # pending at the commit, firing once its 0.3 s `for` has passed: within the 5 s wait,
        # so not at the hour's tick (an upper bound tighter than that measures machine load)
        assert fired - commits.results[-1] >= 0.3
        [(decision_id, state, _)] = notifier.sent
        assert state == State.FIRING
    finally:
        engine.shutdown(deadline_in(1))
    assert [event for event, _, _ in store.history(decision_id)] == ["pending", "firing"]


def test_the_last_round_gauge_moves_with_each_completed_round_and_not_with_a_failed_one(
    store, monkeypatch
):
    clock, notifier = FakeClock(), Notifier()
    engine = engine_over(store, clock, notifier)
    registry = engine.metrics.last_round

    def last_round() -> float:
        [metric] = registry.collect()
        return metric.samples[0].value

    try:
        started = clock.wall()
        assert last_round() == started  # before the first round: the start time
        clock.advance(10)
        engine.evaluate()
        assert last_round() == started + 10

        def broken(now):
            raise RuntimeError("the store is gone")

        monkeypatch.setattr(engine.finder, "find", broken)
        clock.advance(10)
        with pytest.raises(RuntimeError):
            engine.evaluate()
        assert last_round() == started + 10  # a round that fails is not a round
        [interval] = engine.metrics.interval.collect()
        assert interval.samples[0].value == CONFIG.interval_seconds
    finally:
        engine.shutdown(deadline_in(5))


def test_recertifications_are_recorded_without_an_alert_and_a_clean_one_precedes_the_resolve(
    store,
):
    """A refused recertification leaves the decision firing (and survives a restart) and tells
    no channel; the clean one is recorded just before the person's resolve."""
    clock, notifier = FakeClock(), Notifier()
    engine = engine_over(store, clock, notifier)
    store.run(clock.now(), "a" * 32, CHECKOUT)
    store.run(clock.now(), "b" * 32, CHECKOUT)
    engine.evaluate()
    clock.advance(60)
    [fired] = engine.evaluate()
    refused = {"dataset": fired.id, "packs": ["checkout@1"], "result": "fail"}
    engine.recertified(fired.id, "ana", "recertification refused", refused)
    assert active(engine)[CHECKOUT, Decision.QUARANTINE].state == State.FIRING
    assert notifier.sent == [(fired.id, State.FIRING, Event.FIRING)]
    engine.shutdown(deadline_in(1))
    store.close()

    store.open()
    engine = engine_over(store, clock, Notifier())
    try:
        assert active(engine)[CHECKOUT, Decision.QUARANTINE].id == fired.id
        clean = {"dataset": fired.id, "packs": ["checkout@2"], "result": "pass"}
        done = engine.resolve(fired.id, "ana", "fixed", ("recertification passed", clean))
        assert done.state == State.RESOLVED
    finally:
        engine.shutdown(deadline_in(1))
    assert store.history(fired.id) == [
        ("pending", "pending", "sextant"),
        ("firing", "firing", "sextant"),
        ("recertify", "firing", "ana"),
        ("recertify", "firing", "ana"),
        ("resolve", "resolved", "ana"),
    ]
    cursor = store.database.cursor()
    rows = cursor.execute(
        "SELECT seq, note, recertification->>'result' FROM decisions"
        " WHERE decision_id = ? AND event = 'recertify' ORDER BY seq",
        [fired.id],
    ).fetchall()
    cursor.close()
    assert rows == [(3, "recertification refused", "fail"), (4, "recertification passed", "pass")]
