"""Results over sliding windows → decisions per target, every `interval`, recorded as history.

The engine reads aggregates from the store (failed and reviewed results, incomplete traces, the
targets seen) and coverage signals from the running service, runs each decision's state machine,
appends every transition to `decisions`, and hands firing and resolved decisions to the alert
notifier. It never blocks ingest: it runs in its own thread and writes through the writer.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol

import pyarrow as pa

from collector.clock import Clock, SystemClock
from collector.config import DecisionsConfig
from collector.decisions import queries
from collector.decisions.state import (
    DecisionState,
    Finding,
    Key,
    Target,
    effective,
    merge,
    step,
    strongest_first,
)
from collector.evaluation.packs import PackText, compiled
from collector.store.database import Database
from collector.store.tables import ARROW_SCHEMAS
from collector.store.writer import Writer
from collector.telemetry import DecisionMetrics
from collector.ticker import Ticker
from evaluators.base import Decision
from evaluators.rulepack import RulePack

log = logging.getLogger(__name__)

# Coverage that is lost collector-wide (rejected spans, backlog, alert delivery) is about every
# target at once: it is decided for this one, and no target shows PASS while it fires.
EVERY_TARGET = Target("*", "*", "*")
STORE_TIMEOUT_SECONDS = 30.0
MAX_UNWRITTEN = 10_000  # transitions held while the store cannot take them


class PackSource(Protocol):
    def snapshot(self) -> tuple[PackText, ...]: ...


class Notifier(Protocol):
    def notify(self, state: DecisionState, event: str) -> None: ...

    def failing(self) -> list[str]: ...


@dataclass
class Coverage:
    """What the running service knows about its own blind spots."""

    rejected_spans: Callable[[], float] = lambda: 0.0  # cumulative count
    eval_backlog: Callable[[], int] = lambda: 0


@dataclass
class Snapshot:
    states: list[DecisionState]
    targets: dict[Target, datetime] = field(default_factory=dict)  # target -> last closed run

    def decision_of(self, target: Target) -> tuple[Decision, list[str]]:
        """The target's effective decision and the reasons of what fires for it, counting the
        collector-wide coverage decisions (no PASS for a target Sextant could not fully see)."""
        own = [s for s in self.states if s.key.target in (target, EVERY_TARGET)]
        reasons = sorted({r for s in own if s.state == "firing" for r in s.finding.reasons})
        return effective(own), reasons


def naive_utc(seconds: float) -> datetime:
    return datetime.fromtimestamp(seconds, UTC).replace(tzinfo=None)


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
        self.database = database
        self.writer = writer
        self.packs = packs
        self.metrics = metrics
        self.clock = clock or SystemClock()
        self.coverage = coverage or Coverage()
        self.notifier = notifier
        self.operator = operator
        self.ticker = Ticker("sextant-decisions", config.interval_seconds, self.evaluate)
        self._lock = threading.Lock()
        self._flush_lock = threading.Lock()
        self._active: dict[Key, DecisionState] = {}
        self._resolved_by_hand: dict[Key, datetime] = {}
        self._targets: dict[Target, datetime] = {}
        self._rejected: deque[tuple[datetime, float]] = deque()
        self._rejected_changed = datetime.min
        self._unwritten: list[dict[str, Any]] = []

    def start(self) -> None:
        self._rejected.append((self.now(), self.coverage.rejected_spans()))
        self.restore()
        self.ticker.start()

    def shutdown(self, deadline: float) -> None:
        self.ticker.shutdown(deadline)
        self._flush()

    def threads(self) -> list[threading.Thread]:
        return self.ticker.threads()

    def now(self) -> datetime:
        return naive_utc(self.clock.wall())

    def snapshot(self) -> Snapshot:
        with self._lock:
            return Snapshot(strongest_first(list(self._active.values())), dict(self._targets))

    # -- evaluation ----------------------------------------------------------------------------

    def evaluate(self) -> list[DecisionState]:
        """One round: find what holds now, step every decision, record and notify transitions."""
        now = self.now()
        findings = self.findings(now)
        with self._lock:
            changed = []
            for key in set(findings) | set(self._active):
                found = findings.get(key)
                by_hand = self._resolved_by_hand.get(key)
                if found is not None and by_hand is not None:
                    if found.latest is not None and found.latest <= by_hand:
                        found = None  # only failures after a person resolved it count again
                    else:
                        del self._resolved_by_hand[key]
                state = step(self._active.get(key), key, found, now)
                if state is None:
                    continue
                if state.state == "resolved":
                    self._active.pop(key, None)
                else:
                    self._active[key] = state
                if state.events:
                    changed.append(state)
                    self._transition(state, now)
            # A person's resolution only has to outlast the failures it covered.
            forget_before = now - timedelta(seconds=self.config.window_seconds)
            for key in [k for k, t in self._resolved_by_hand.items() if t < forget_before]:
                if key not in findings:
                    del self._resolved_by_hand[key]
        self._flush()
        self.metrics.evaluations.inc()
        return changed

    def findings(self, now: datetime) -> dict[Key, Finding]:
        cursor = self.database.cursor()
        try:
            packs = [compiled(p) for p in self.packs.snapshot()]
            windows = {self.config.window_seconds} | {p.window for r in packs for p in r.decisions}
            groups = {w: queries.result_groups(cursor, now - timedelta(seconds=w)) for w in windows}
            found: dict[Key, Finding] = {}
            for pack in packs:
                self._pack_findings(cursor, now, pack, groups, found)
            self._coverage_findings(cursor, now, found)
            return found
        finally:
            cursor.close()

    def _pack_findings(
        self,
        cursor: Any,
        now: datetime,
        pack: RulePack,
        groups: dict[float, list[queries.Group]],
        found: dict[Key, Finding],
    ) -> None:
        def matched(policy_when: Any, g: queries.Group) -> bool:
            return policy_when.matches(g.rule_id, g.reason, g.severity, g.verdict)

        for policy in pack.decisions:
            by_target: dict[Target, list[queries.Group]] = {}
            for g in groups[policy.window]:
                if g.pack == pack.name and matched(policy.when, g):
                    by_target.setdefault(g.target, []).append(g)
            # One run can fail several matching rules: where that can matter, count runs once.
            several = [h for hits in by_target.values() if len(hits) > 1 for h in hits]
            distinct = {}
            if several:
                since = now - timedelta(seconds=policy.window)
                distinct = queries.distinct_runs(cursor, since, pack.name, several)
            for target, hits in by_target.items():
                runs = distinct.get(target, sum(g.runs for g in hits))
                if runs >= policy.count:
                    key = Key(target, policy.decision, f"{pack.name}/{policy.id}")
                    add(found, key, self._finding(pack, hits, policy.summary, policy))
        # Without a policy, a failed rule's on_fail applies on its first failure.
        for g in groups[self.config.window_seconds]:
            if g.pack != pack.name or any(matched(p.when, g) for p in pack.decisions):
                continue
            if g.verdict == "review":
                key = Key(g.target, Decision.REVIEW, f"{pack.name}/review")
            elif g.requested_decision and g.requested_decision != Decision.PASS:
                key = Key(g.target, Decision(g.requested_decision), f"{pack.name}/on_fail")
            else:
                continue
            add(found, key, self._finding(pack, [g], "", None))

    def _finding(
        self, pack: RulePack, hits: list[queries.Group], summary: str, policy: Any
    ) -> Finding:
        hits = sorted(hits, key=lambda g: g.latest, reverse=True)
        evidence = tuple(dict.fromkeys(t for g in hits for t in g.traces))
        return Finding(
            reasons=tuple(sorted({g.reason for g in hits if g.reason})),
            rules=tuple(sorted({f"{pack.name}/{g.rule_id}" for g in hits})),
            packs=tuple(sorted({f"{pack.name}@{g.pack_version or pack.version}" for g in hits})),
            owner=pack.owner,
            evidence=evidence,
            summary=summary,
            for_seconds=policy.for_seconds if policy else 0.0,
            resolve_after=policy.resolve_after if policy else self.config.resolve_after_seconds,
            latest=hits[0].latest,
        )

    def _coverage_findings(self, cursor: Any, now: datetime, found: dict[Key, Finding]) -> None:
        window = timedelta(seconds=self.config.window_seconds)

        def lost(
            target: Target,
            policy: str,
            reason: str,
            summary: str,
            evidence: tuple[str, ...] = (),
            latest: datetime = now,
        ) -> None:
            key = Key(target, Decision.REVIEW, f"coverage/{policy}")
            add(
                found,
                key,
                Finding(
                    reasons=(reason,),
                    owner=self.operator,
                    evidence=tuple(evidence),
                    summary=summary,
                    resolve_after=self.config.resolve_after_seconds,
                    latest=latest,
                ),
            )

        for row in queries.rows(cursor, queries.INCOMPLETE, now - window):
            lost(
                queries.target_of(row),
                "incomplete_traces",
                "coverage_lost_incomplete_traces",
                f"{row['runs']} trace(s) closed incomplete in the last {window}",
                tuple(row["traces"]),
                row["latest"],
            )
        rejected, last_rejected = self._rejected_in_window(now, window)
        if rejected > 0:
            lost(
                EVERY_TARGET,
                "rejected_spans",
                "coverage_lost_rejected_spans",
                f"{rejected:.0f} span(s) rejected in the last {window}",
                latest=last_rejected,
            )
        backlog = self.coverage.eval_backlog()
        if backlog > self.config.max_eval_backlog:
            lost(
                EVERY_TARGET,
                "eval_backlog",
                "coverage_lost_eval_backlog",
                f"{backlog} traces wait to be evaluated (bound {self.config.max_eval_backlog})",
            )
        failing = self.notifier.failing() if self.notifier is not None else []
        if failing:
            lost(
                EVERY_TARGET,
                "alert_delivery",
                "alert_delivery_failing",
                "alerts cannot be delivered to " + ", ".join(failing),
            )
        lookback = now - timedelta(seconds=self.config.lookback_seconds)
        targets = {
            queries.target_of(r): r["last_closed"]
            for r in queries.rows(cursor, queries.TARGETS, lookback)
        }
        with self._lock:
            self._targets = targets
        if self.config.no_data == "ignore":
            return
        silent_since = now - timedelta(seconds=self.config.no_data_after_seconds)
        sending = {(t.service, t.agent) for t, last in targets.items() if last >= silent_since}
        for target, last in targets.items():
            # A version whose service and agent still send under another version was replaced.
            if last < silent_since and (target.service, target.agent) not in sending:
                since = f"{last:%Y-%m-%d %H:%M}Z"
                lost(target, "no_data", "no_data", f"no trajectories since {since}", latest=last)

    def _rejected_in_window(self, now: datetime, window: timedelta) -> tuple[float, datetime]:
        """Rejected spans counted by the receivers within the window (a counter's increase), and
        when the count last went up."""
        total = self.coverage.rejected_spans()
        samples = self._rejected
        if not samples or total != samples[-1][1]:
            self._rejected_changed = now
        samples.append((now, total))
        while len(samples) > 1 and samples[1][0] <= now - window:
            samples.popleft()
        return total - samples[0][1], self._rejected_changed

    # -- people ----------------------------------------------------------------------------------

    def acknowledge(self, decision_id: str, by: str, note: str) -> DecisionState:
        """Someone has seen it and owns it: recorded, shown on the alert, the state unchanged."""
        with self._lock:
            state = self._find(decision_id)
            state = replace(state, acked_by=by, ack_note=note, events=("ack",))
            self._active[state.key] = state
            self._transition(state, self.now(), actor=by, note=note)
            acked = self._active[state.key]
        self._flush()
        return acked

    def resolve(self, decision_id: str, by: str, note: str) -> DecisionState:
        """Someone dealt with it: resolved now; only new failures open a new decision."""
        with self._lock:
            state = self._find(decision_id)
            now = self.now()
            state = replace(state, state="resolved", resolved_at=now, events=("resolve",))
            del self._active[state.key]
            self._resolved_by_hand[state.key] = now
            self._transition(state, now, actor=by, note=note)
        self._flush()
        return state

    def _find(self, decision_id: str) -> DecisionState:
        for state in self._active.values():
            if state.id == decision_id:
                return state
        raise LookupError(f"no pending or firing decision {decision_id}")

    # -- recording -------------------------------------------------------------------------------

    def _transition(
        self, state: DecisionState, now: datetime, actor: str | None = None, note: str | None = None
    ) -> None:
        for event in state.events:
            state = replace(state, seq=state.seq + 1)
            if state.state != "resolved":
                self._active[state.key] = state
            self._unwritten.append(row(state, event, now, actor or self.operator, note))
            evidence = state.finding.evidence
            exemplar = {"trace_id": evidence[0]} if evidence else None
            self.metrics.transitions.labels(state.key.decision.value, event).inc(1, exemplar)
            if self.notifier is not None and event != "pending":
                self.notifier.notify(state, event)

    def _flush(self) -> None:
        """Write transitions outside the state lock (a slow store must not stall scrapes); a
        failed write keeps them for the next round, up to MAX_UNWRITTEN."""
        with self._flush_lock:
            with self._lock:
                pending, self._unwritten = self._unwritten, []
            if not pending:
                return
            try:
                table = pa.Table.from_pylist(pending, schema=ARROW_SCHEMAS["decisions"])
                self.writer.submit_tables({"decisions": table}).result(STORE_TIMEOUT_SECONDS)
            except Exception:
                log.exception("could not record %d decision transitions; retrying", len(pending))
                with self._lock:
                    self._unwritten = (pending + self._unwritten)[-MAX_UNWRITTEN:]

    def restore(self) -> None:
        """Pending and firing decisions carry across a restart, with their ids and history."""
        cursor = self.database.cursor()
        try:
            cursor.execute(RESTORE)
            names = [d[0] for d in cursor.description]
            restored = [dict(zip(names, r, strict=True)) for r in cursor.fetchall()]
        finally:
            cursor.close()
        timing = {
            f"{pack.name}/{p.id}": (p.for_seconds, p.resolve_after)
            for pack in (compiled(t) for t in self.packs.snapshot())
            for p in pack.decisions
        }
        now = self.now()
        with self._lock:
            for r in restored:
                state = from_row(r, now, timing, self.config.resolve_after_seconds)
                self._active[state.key] = state
                if self.notifier is not None and state.state == "firing":
                    # Alertmanager forgets alerts that are not re-sent: pick them up again.
                    self.notifier.notify(state, "firing")
        if restored:
            log.info("restored %d pending or firing decisions", len(restored))


RESTORE = """
SELECT *,
    last_value(CASE WHEN event = 'ack' THEN actor END IGNORE NULLS) OVER history AS acked_by,
    last_value(CASE WHEN event = 'ack' THEN note END IGNORE NULLS) OVER history AS ack_note
FROM decisions
WINDOW history AS (PARTITION BY decision_id ORDER BY seq
                   ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING)
QUALIFY row_number() OVER (PARTITION BY decision_id ORDER BY seq DESC) = 1
    AND state <> 'resolved'
"""


def add(found: dict[Key, Finding], key: Key, finding: Finding) -> None:
    old = found.get(key)
    if old is not None:
        times = [t for t in (old.latest, finding.latest) if t is not None]
        finding = replace(merge(old, finding), latest=max(times, default=None))
    found[key] = finding


def row(
    state: DecisionState, event: str, now: datetime, actor: str, note: str | None
) -> dict[str, Any]:
    f = state.finding
    return {
        "decision_id": state.id,
        "seq": state.seq,
        "event": event,
        "state": state.state,
        "decision": state.key.decision.value,
        "service_name": state.key.target.service,
        "agent_name": state.key.target.agent,
        "service_version": state.key.target.version,
        "policy": state.key.policy,
        "reasons": list(f.reasons),
        "owner": f.owner,
        "rules": list(f.rules),
        "packs": list(f.packs),
        "evidence_trace_ids": list(f.evidence),
        "summary": summary_of(state),
        "active_at": state.active_at,
        "fired_at": state.fired_at,
        "resolved_at": state.resolved_at,
        "actor": actor,
        "note": note,
        "changed_at": now,
    }


def summary_of(state: DecisionState) -> str:
    f = state.finding
    what = f.summary or ", ".join(f.reasons) or "condition holds"
    return f"{state.key.decision.value} {state.key.target.label()}: {what}"


def from_row(
    r: dict[str, Any], now: datetime, timing: dict[str, tuple[float, float]], resolve_after: float
) -> DecisionState:
    """A decision as stored. Its policy's `for` and `resolve_after` come from the packs in force
    (the default when the policy is gone), and its condition counts as seen at restart: a
    restart never resolves a decision early."""
    key = Key(
        Target(r["service_name"] or "", r["agent_name"] or "", r["service_version"] or ""),
        Decision(r["decision"]),
        r["policy"] or "",
    )
    finding = Finding(
        reasons=tuple(r["reasons"] or ()),
        rules=tuple(r["rules"] or ()),
        packs=tuple(r["packs"] or ()),
        owner=r["owner"] or "",
        evidence=tuple(r["evidence_trace_ids"] or ()),
        for_seconds=timing.get(key.policy, (0.0, resolve_after))[0],
        resolve_after=timing.get(key.policy, (0.0, resolve_after))[1],
    )
    return DecisionState(
        key=key,
        id=r["decision_id"],
        state=r["state"],
        active_at=r["active_at"],
        last_seen_at=now,
        finding=finding,
        fired_at=r["fired_at"],
        acked_by=r["acked_by"],
        ack_note=r["ack_note"],
        seq=r["seq"],
    )
