"""The decision engine: every `interval`, and as soon as a failing result is stored, steps each
decision on what holds now, records, notifies.

It asks `conditions.ConditionFinder` what holds (from window aggregates and coverage counts),
steps the pure state machine of `state.py` for every key, appends each transition through
`persistence.DecisionLog`, and hands firing, changed and resolved decisions to the alert notifier.
It never blocks ingest: it runs in its own thread and writes through the writer. A commit of a live
fail or review result wakes that thread early (`consume`), so a decision fires or starts its `for`
within a round's time of the result. Otherwise a round comes every interval, or when a pending
decision's `for` ends if that is sooner; those rounds resolve, slide windows and notice no-data.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any, Protocol

import pyarrow as pa
import pyarrow.compute as pc

from collector.clock import Clock, SystemClock
from collector.config.decisions import DecisionsConfig
from collector.decisions.conditions import ConditionFinder, Coverage, PackSource
from collector.decisions.metrics import DecisionMetrics
from collector.decisions.persistence import DecisionLog, row
from collector.decisions.state import (
    DecisionState,
    Event,
    Key,
    Observation,
    State,
    effective,
    resolved,
    step,
    strongest_first,
)
from collector.review.backlog import Queue
from collector.store.database import Database
from collector.store.reader import Interrupted
from collector.store.writer import Writer
from collector.targets import Target
from collector.ticker import Ticker
from evaluators.base import Decision

log = logging.getLogger(__name__)


class Notifier(Protocol):
    def notify(self, state: DecisionState, event: Event) -> None: ...

    def failing(self) -> list[str]: ...


@dataclass
class Snapshot:
    states: list[DecisionState]
    targets: dict[Target, datetime] = field(default_factory=dict)  # target -> last closed run
    review: dict[tuple[str, str], Queue] = field(default_factory=dict)  # (owner, pack) -> queue

    def decision_of(self, target: Target) -> tuple[Decision, list[str]]:
        """The target's effective decision and the reasons of what fires for it, counting the
        decisions of every scope that takes it in (its service's rejected spans, collector-wide
        coverage): no PASS for a target Sextant could not fully see."""
        own = [s for s in self.states if s.key.target.covers(target)]
        reasons = sorted({r for s in own if s.state == State.FIRING for r in s.finding.reasons})
        return effective(own), reasons


class DecisionEngine:
    def __init__(
        self,
        config: DecisionsConfig,
        database: Database,
        writer: Writer,
        packs: PackSource,
        metrics: DecisionMetrics,
        clock: Clock | None = None,
        coverage: Coverage | None = None,
        notifier: Notifier | None = None,
        operator: str = "sextant",
    ) -> None:
        self.config = config
        self.metrics = metrics
        self.clock = clock or SystemClock()
        self.notifier = notifier
        self.operator = operator
        failing = notifier.failing if notifier is not None else list
        self.finder = ConditionFinder(
            config, database, packs, coverage or Coverage(), failing, operator
        )
        self.log = DecisionLog(database, writer)
        self.ticker = Ticker(
            "sextant-decisions", self.next_round_in, self.evaluate, config.wake_gap_seconds
        )
        self._lock = threading.Lock()
        self._active: dict[Key, DecisionState] = {}
        self._resolved_by_hand: dict[Key, datetime] = {}
        self._targets: dict[Target, datetime] = {}
        self._review: dict[tuple[str, str], Queue] = {}
        # What scrapes, the API and the console read: published under the lock at the end of
        # each change, read without it, so a reader never waits for a round in progress.
        self._published = Snapshot([])
        # told after each publication (the guard's native listener forgets what it was told)
        self.on_publish: list[Callable[[], None]] = []
        metrics.interval.set(config.interval_seconds)

    def start(self) -> None:
        # A loop that never completes its first round is as stalled as one that stopped.
        self.metrics.last_round.set(self.clock.wall())
        self.finder.start(self.now())
        self.restore()
        self.ticker.start()

    def shutdown(self, deadline: float) -> None:
        self.ticker.stopping.set()
        self.finder.reader.stop(deadline)  # a long round ends at its query
        self.ticker.shutdown(deadline)
        self.log.flush()

    def threads(self) -> list[threading.Thread]:
        return self.ticker.threads()

    def now(self) -> datetime:
        return self.clock.now()

    def snapshot(self) -> Snapshot:
        """The decisions as of the last round or person's action (never waits for a round)."""
        return self._published

    def _publish(self) -> None:
        """Under the lock, once the states are consistent again."""
        self._published = Snapshot(
            strongest_first(list(self._active.values())), dict(self._targets), dict(self._review)
        )
        for told in self.on_publish:
            told()

    def consume(self, tables: dict[str, pa.Table], received_at: datetime) -> None:
        """Commit hook: stored live fail or review results wake the next round now. It runs in
        the writer thread, so it only looks at the committed columns, never at the store."""
        results = tables.get("results")
        if results is not None and results.num_rows and can_decide(results):
            self.metrics.wakeups.inc()
            self.ticker.wake()

    def next_round_in(self) -> float:
        """Seconds to the next round: the interval, or less when a pending decision's `for`
        ends sooner, so that it fires then rather than up to an interval later."""
        now = self.now()
        with self._lock:
            ends = [
                s.finding.for_seconds - (now - s.active_at).total_seconds()
                for s in self._active.values()
                if s.state == State.PENDING
            ]
        # Never 0: a round that keeps failing must not spin.
        floor = max(self.config.wake_gap_seconds, 0.01)
        return max(floor, min([self.config.interval_seconds, *ends]))

    # -- evaluation ----------------------------------------------------------------------------

    def evaluate(self) -> list[DecisionState]:
        """One round: find what holds now, step every decision, record and notify transitions."""
        self.finder.read_counts()  # before `now`: what they count happened before it
        now = self.now()
        try:
            found = self.finder.find(now)
        except Interrupted:
            log.info("decision round abandoned: shutting down")
            return []
        with self._lock:
            self._targets = found.targets
            self._review = found.review
            changed = self._step_all(found.conditions, now)
            self._publish()
        self.log.flush()
        self.metrics.evaluations.inc()
        self.metrics.last_round.set(self.clock.wall())
        return changed

    def _step_all(self, conditions: dict[Key, Observation], now: datetime) -> list[DecisionState]:
        changed = []
        for key in set(conditions) | set(self._active):
            state = step(self._active.get(key), key, self._counted(key, conditions, now), now)
            if state is None:
                continue
            if state.state == State.RESOLVED:
                self._active.pop(key, None)
            else:
                self._active[key] = state
            if state.events:
                changed.append(state)
                self._transition(state, now)
        # A person's resolution only has to outlast the failures it covered.
        forget_before = now - timedelta(seconds=self.config.window_seconds)
        for key in [k for k, t in self._resolved_by_hand.items() if t < forget_before]:
            if key not in conditions:
                del self._resolved_by_hand[key]
        return changed

    def _counted(
        self, key: Key, conditions: dict[Key, Observation], now: datetime
    ) -> Observation | None:
        """The key's condition, unless a person resolved it after its newest failure: only
        failures after a person resolved it count again."""
        found = conditions.get(key)
        by_hand = self._resolved_by_hand.get(key)
        if found is None or by_hand is None:
            return found
        if found.latest is not None and found.latest <= by_hand:
            return None
        del self._resolved_by_hand[key]
        return found

    # -- people ----------------------------------------------------------------------------------

    def acknowledge(self, decision_id: str, by: str, note: str) -> DecisionState:
        """Someone has seen it and owns it: recorded, shown on the alert, the state unchanged."""
        with self._lock:
            state = self._find(decision_id)
            state = replace(state, acked_by=by, ack_note=note, events=(Event.ACK,))
            self._active[state.key] = state
            self._transition(state, self.now(), actor=by, note=note)
            acked = self._active[state.key]
            self._publish()
        self.log.flush()
        return acked

    def resolve(
        self,
        decision_id: str,
        by: str,
        note: str,
        recertification: tuple[str, dict[str, Any]] | None = None,
    ) -> DecisionState:
        """Someone dealt with it: resolved now; only new failures open a new decision. A
        recertification it was resolved on (summary, details) is recorded just before."""
        with self._lock:
            state = self._find(decision_id)
            now = self.now()
            if recertification is not None:
                state = self._recertify(state, now, by, *recertification)
            state = resolved(state, now, Event.RESOLVE)
            del self._active[state.key]
            self._resolved_by_hand[state.key] = now
            self._transition(state, now, actor=by, note=note)
            self._publish()
        self.log.flush()
        return state

    def recertified(self, decision_id: str, by: str, summary: str, details: dict[str, Any]) -> None:
        """A recertification that did not come clean: recorded, the state unchanged."""
        with self._lock:
            self._recertify(self._find(decision_id), self.now(), by, summary, details)
            self._publish()
        self.log.flush()

    def _recertify(
        self, state: DecisionState, now: datetime, by: str, summary: str, details: dict[str, Any]
    ) -> DecisionState:
        state = replace(state, seq=state.seq + 1, events=())
        self._active[state.key] = state
        self.log.append(row(state, Event.RECERTIFY, now, by, summary, details))
        self.metrics.transitions.labels(state.key.decision.value, Event.RECERTIFY).inc()
        return state

    def find(self, decision_id: str) -> DecisionState:
        """The pending or firing decision with this id; LookupError when there is none."""
        with self._lock:
            return self._find(decision_id)

    def _find(self, decision_id: str) -> DecisionState:
        for state in self._active.values():
            if state.id == decision_id:
                return state
        raise LookupError(f"no pending or firing decision {decision_id}")

    # -- recording -------------------------------------------------------------------------------

    def _transition(
        self, state: DecisionState, now: datetime, actor: str | None = None, note: str | None = None
    ) -> None:
        """Record each of the state's events (under the lock; written at the next flush)."""
        for event in state.events:
            state = replace(state, seq=state.seq + 1)
            if state.state != State.RESOLVED:
                self._active[state.key] = state
            self.log.append(row(state, event, now, actor or self.operator, note))
            evidence = state.finding.evidence
            exemplar = {"trace_id": evidence[0]} if evidence else None
            self.metrics.transitions.labels(state.key.decision.value, event).inc(1, exemplar)
            if self.notifier is not None and event != Event.PENDING:
                self.notifier.notify(state, event)

    def restore(self) -> None:
        """Pending and firing decisions carry across a restart, with their ids and history."""
        now = self.now()
        restored = self.log.restore(now, self.finder.timings(), self.config.resolve_after_seconds)
        with self._lock:
            for state in restored:
                self._active[state.key] = state
                if self.notifier is not None and state.state == State.FIRING:
                    # Alertmanager forgets alerts that are not re-sent: pick them up again.
                    self.notifier.notify(state, Event.FIRING)
            self._publish()
        if restored:
            log.info("restored %d pending or firing decisions", len(restored))


def can_decide(results: pa.Table) -> bool:
    """Whether these results rows include one a decision counts (as the round's queries do),
    or a reviewer's label, whose pass clears the REVIEW it answers."""
    counted = pc.and_(
        pc.equal(results["origin"], "live"),
        pc.or_(
            pc.is_in(results["verdict"], pa.array(["fail", "review"])),
            pc.fill_null(pc.equal(results["source"], "human"), False),
        ),
    )
    return bool(pc.any(counted).as_py())
