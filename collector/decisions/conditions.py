"""From window aggregates and coverage counts to the conditions that hold now, one per key.

A policy's condition holds when enough runs of a target failed its matching rules in its window;
a failed rule outside every policy applies its `on_fail` on the first failure; lost coverage
(incomplete traces, rejected spans, an evaluation backlog, failing alert delivery, a silent
target) is a REVIEW, and so is a review item left unanswered past its pack's `review.sla` (or
the stronger decision the pack's `review.decision` names). Every query of one round reads one
snapshot of the store.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta

import duckdb

from collector.config.decisions import DecisionsConfig
from collector.decisions import queries
from collector.decisions.state import (
    COLLECTOR_TARGET,
    EVERY_TARGET,
    Key,
    Observation,
    merge,
    service_scope,
)
from collector.evaluation.packs import PackSource, compiled
from collector.review import backlog
from collector.store.database import Database
from collector.store.reader import Reader
from collector.targets import Target
from evaluators.base import Decision, Verdict
from evaluators.durations import duration_text
from evaluators.policies import DecisionPolicy
from evaluators.rulepack import RulePack


@dataclass
class Coverage:
    """Counts from the stages that know Sextant's own blind spots, read once a round."""

    # cumulative count of rejected spans by the service that sent them ("" = cannot be told)
    rejected_spans: Callable[[], Mapping[str, float]] = dict
    eval_backlog: Callable[[], int] = lambda: 0  # traces waiting to be evaluated


@dataclass
class Found:
    """One round's conditions, and each target seen in the lookback with its last closed run."""

    conditions: dict[Key, Observation] = field(default_factory=dict)
    targets: dict[Target, datetime] = field(default_factory=dict)
    # (owner, pack) -> its review queue: what the review backlog gauges show
    review: dict[tuple[str, str], backlog.Queue] = field(default_factory=dict)


class RejectedWindow:
    """Spans rejected within a sliding window per sender, from cumulative counts (by service;
    "" where the sender cannot be told) sampled every round."""

    def __init__(self, counts: Callable[[], Mapping[str, float]]) -> None:
        self.counts = counts
        self._samples: deque[tuple[datetime, dict[str, float]]] = deque()
        self._changed: dict[str, datetime] = {}
        self._read: dict[str, float] | None = None

    def start(self, now: datetime) -> None:
        """Counts from before the start are not this run's blind spot."""
        self._samples.append((now, dict(self.counts())))

    def read(self) -> None:
        """Reads the counts for the next `within`, before its `now` is taken: a rise is then
        dated after every rejection behind it, never before (a rejection that comes after
        someone resolved the decision is new evidence)."""
        self._read = dict(self.counts())

    def within(self, now: datetime, window: timedelta) -> dict[str, tuple[float, datetime]]:
        """Per sender with rejections in the window: their number, and when it last went up."""
        totals = self._read if self._read is not None else dict(self.counts())
        self._read = None
        samples = self._samples
        last = samples[-1][1] if samples else {}
        for sender, total in totals.items():
            if not samples or total != last.get(sender, 0.0):
                self._changed[sender] = now
        samples.append((now, totals))
        while len(samples) > 1 and samples[1][0] <= now - window:
            samples.popleft()
        oldest = samples[0][1]
        return {
            sender: (total - oldest.get(sender, 0.0), self._changed.get(sender, now))
            for sender, total in sorted(totals.items())
            if total > oldest.get(sender, 0.0)
        }


class ConditionFinder:
    def __init__(
        self,
        config: DecisionsConfig,
        database: Database,
        packs: PackSource,
        coverage: Coverage,
        failing: Callable[[], list[str]],
        operator: str,
    ) -> None:
        self.config = config
        self.database = database
        self.reader = Reader(database)  # interrupted by the engine's shutdown
        self.packs = packs
        self.coverage = coverage
        self.failing = failing  # the alert channels that cannot deliver
        self.operator = operator
        self.rejected = RejectedWindow(coverage.rejected_spans)
        self.review = backlog.BacklogReader(config.review_backlog_seconds)

    def start(self, now: datetime) -> None:
        self.rejected.start(now)

    def read_counts(self) -> None:
        """Reads the coverage counts for the next `find`: call it before taking its `now`."""
        self.rejected.read()

    def timings(self) -> dict[str, tuple[float, float]]:
        """Each policy's `for` and `resolve_after` in the packs in force, by policy name."""
        return {
            f"{pack.name}/{p.id}": (p.for_seconds, p.resolve_after)
            for pack in (compiled(t) for t in self.packs.snapshot())
            for p in pack.decisions
        }

    def find(self, now: datetime) -> Found:
        """What holds at `now`. One snapshot (the reader's round is one read transaction): a
        policy's groups and its distinct-run count must see the same results, or a run
        committed in between counts without its evidence."""
        with self.reader.cursor() as cursor:
            return self._find(cursor, now)

    def _find(self, cursor: duckdb.DuckDBPyConnection, now: datetime) -> Found:
        packs = [compiled(p) for p in self.packs.snapshot()]
        windows = {self.config.window_seconds} | {p.window for r in packs for p in r.decisions}
        groups = {w: queries.result_groups(cursor, now - timedelta(seconds=w)) for w in windows}
        found = Found()
        for pack in packs:
            for policy in pack.decisions:
                self._policy(cursor, now, pack, policy, groups[policy.window], found)
            self._on_fail(pack, groups[self.config.window_seconds], found)
        self._incomplete(cursor, now, found)
        self._review_backlog(cursor, now, packs, found)
        self._rejected(now, found)
        self._collector_wide(now, found)
        self._targets(cursor, now, found)
        return found

    def _policy(
        self,
        cursor: duckdb.DuckDBPyConnection,
        now: datetime,
        pack: RulePack,
        policy: DecisionPolicy,
        groups: list[queries.Group],
        found: Found,
    ) -> None:
        by_target: dict[Target, list[queries.Group]] = {}
        for g in groups:
            if matches(pack, policy, g):
                by_target.setdefault(g.target, []).append(g)
        # One run can fail several matching rules: where that can matter, count runs once.
        several = [h for hits in by_target.values() if len(hits) > 1 for h in hits]
        distinct = {}
        if several:
            since = now - timedelta(seconds=policy.window)
            distinct = queries.distinct_runs(cursor, since, several)
        for target, hits in by_target.items():
            runs = distinct.get(target, sum(g.runs for g in hits))
            if runs >= policy.count:
                key = Key(target, policy.decision, f"{pack.name}/{policy.id}")
                timing = (policy.for_seconds, policy.resolve_after)
                add(found, key, from_groups(pack, hits, policy.summary, timing))

    def _on_fail(self, pack: RulePack, groups: list[queries.Group], found: Found) -> None:
        """Without a policy of its own pack, a failed rule's on_fail applies on its first failure
        (another pack's policy adds its own decision; it cannot silence this pack's)."""
        timing = (0.0, self.config.resolve_after_seconds)
        for g in groups:
            if g.pack != pack.name or any(matches(pack, p, g) for p in pack.decisions):
                continue
            if g.verdict == Verdict.REVIEW:
                key = Key(g.target, Decision.REVIEW, f"{pack.name}/review")
            elif g.requested_decision and g.requested_decision != Decision.PASS:
                key = Key(g.target, Decision(g.requested_decision), f"{pack.name}/on_fail")
            else:
                continue
            add(found, key, from_groups(pack, [g], "", timing))

    # -- coverage --------------------------------------------------------------------------------

    def _lost(
        self,
        found: Found,
        target: Target,
        policy: str,
        reason: str,
        summary: str,
        latest: datetime,
        evidence: tuple[str, ...] = (),
    ) -> None:
        condition = Observation(
            reasons=(reason,),
            owner=self.operator,
            evidence=evidence,
            summary=summary,
            resolve_after=self.config.resolve_after_seconds,
            latest=latest,
        )
        add(found, Key(target, Decision.REVIEW, f"coverage/{policy}"), condition)

    def _incomplete(self, cursor: duckdb.DuckDBPyConnection, now: datetime, found: Found) -> None:
        window = timedelta(seconds=self.config.window_seconds)
        for row in queries.rows(cursor, queries.INCOMPLETE, now - window):
            self._lost(
                found,
                queries.target_of(row),
                "incomplete_traces",
                "coverage_lost_incomplete_traces",
                f"{row['runs']} trace(s) closed incomplete in the last {window}",
                row["latest"],
                tuple(row["traces"]),
            )

    def _review_backlog(
        self, cursor: duckdb.DuckDBPyConnection, now: datetime, packs: list[RulePack], found: Found
    ) -> None:
        """A review item waiting past its pack's `review.sla` costs its target's coverage: a
        person was to look at that run and nobody has. The pack's owner answers for it; the
        overdue runs, longest waiting first, are the evidence. It clears once they are labelled."""
        in_force = {p.name: p for p in packs}
        slas = {p.name: p.review.sla for p in packs if p.review.sla is not None}
        pending = self.review.read(cursor, now, slas)
        audited = self.review.read_audits(cursor, now)
        found.review = backlog.queues(pending, {p.name: p.owner for p in packs}, slas, audited)
        for p in pending:
            pack = in_force.get(p.pack)
            if pack is None or pack.review.sla is None or not p.overdue:
                continue
            sla = pack.review.sla
            condition = Observation(
                reasons=("coverage_lost_review_backlog",),
                rules=tuple(f"{p.pack}/{rule}" for rule in p.rules),
                packs=(f"{pack.name}@{pack.version}",),
                owner=pack.owner,
                evidence=p.traces,
                summary=f"{p.overdue} review item(s) of pack {pack.name} unanswered past its"
                f" review.sla ({duration_text(sla)})",
                resolve_after=self.config.resolve_after_seconds,
                # when the newest of them went overdue: a person's resolution covers those
                latest=p.newest_overdue + timedelta(seconds=sla) if p.newest_overdue else now,
            )
            key = Key(p.target, pack.review.decision, f"{pack.name}/review_backlog")
            add(found, key, condition)

    def _rejected(self, now: datetime, found: Found) -> None:
        """Rejected spans cost the coverage of the service that sent them; those whose sender
        cannot be told cost Sextant's own health, never every target."""
        window = timedelta(seconds=self.config.window_seconds)
        reason = "coverage_lost_rejected_spans"
        for sender, (count, latest) in self.rejected.within(now, window).items():
            if sender:
                target = service_scope(sender)
                summary = f"{count:.0f} span(s) from service {sender} rejected in the last {window}"
            else:
                target = COLLECTOR_TARGET
                summary = (
                    f"{count:.0f} span(s) or undecodable request(s) from no service that can be"
                    f" told rejected in the last {window}"
                )
            self._lost(found, target, "rejected_spans", reason, summary, latest)

    def _collector_wide(self, now: datetime, found: Found) -> None:
        """Coverage lost for every target at once: evaluation backlog, alert delivery."""
        backlog, bound = self.coverage.eval_backlog(), self.config.max_eval_backlog
        if backlog > bound:
            summary = f"{backlog} traces wait to be evaluated (bound {bound})"
            reason = "coverage_lost_eval_backlog"
            self._lost(found, EVERY_TARGET, "eval_backlog", reason, summary, now)
        failing = self.failing()
        if failing:
            summary = "alerts cannot be delivered to " + ", ".join(failing)
            reason = "alert_delivery_failing"
            self._lost(found, EVERY_TARGET, "alert_delivery", reason, summary, now)

    def _targets(self, cursor: duckdb.DuckDBPyConnection, now: datetime, found: Found) -> None:
        """The targets seen in the lookback, and a REVIEW for those that went silent."""
        lookback = now - timedelta(seconds=self.config.lookback_seconds)
        found.targets = {
            queries.target_of(r): r["last_closed"]
            for r in queries.rows(cursor, queries.TARGETS, lookback)
        }
        if self.config.no_data == "ignore":
            return
        silent_since = now - timedelta(seconds=self.config.no_data_after_seconds)
        targets = found.targets
        sending = {(t.service, t.agent) for t, last in targets.items() if last >= silent_since}
        for target, last in targets.items():
            # A version whose service and agent still send under another version was replaced.
            if last < silent_since and (target.service, target.agent) not in sending:
                summary = f"no trajectories since {last:%Y-%m-%d %H:%M}Z"
                self._lost(found, target, "no_data", "no_data", summary, last)


def matches(pack: RulePack, policy: DecisionPolicy, g: queries.Group) -> bool:
    return policy.when.matches(pack.name, (g.pack, g.rule_id, g.reason, g.severity, g.verdict))


def from_groups(
    pack: RulePack, hits: list[queries.Group], summary: str, timing: tuple[float, float]
) -> Observation:
    """The condition behind these groups (of `pack`'s policy, maybe over other packs' results):
    their reasons, rules, pack versions, newest evidence first, `pack`'s owner; `timing` is the
    policy's (`for`, `resolve_after`)."""
    hits = sorted(hits, key=lambda g: g.latest, reverse=True)
    return Observation(
        reasons=tuple(sorted({g.reason for g in hits if g.reason})),
        rules=tuple(sorted({f"{g.pack}/{g.rule_id}" for g in hits})),
        packs=tuple(sorted({f"{g.pack}@{version_of(pack, g)}" for g in hits})),
        owner=pack.owner,
        evidence=tuple(dict.fromkeys(t for g in hits for t in g.traces)),
        summary="; ".join(filter(None, [summary, labelled_by(hits)])),
        for_seconds=timing[0],
        resolve_after=timing[1],
        latest=hits[0].latest,
    )


def labelled_by(hits: list[queries.Group]) -> str:
    """Who labelled the runs behind a decision fail, when people did: evidence as much as the
    runs are."""
    people = sorted({name for g in hits for name in g.reviewers})
    return f"labelled fail in review by {', '.join(people)}" if people else ""


def version_of(pack: RulePack, g: queries.Group) -> str:
    return g.pack_version or (pack.version if g.pack == pack.name else "?")


def add(found: Found, key: Key, condition: Observation) -> None:
    """Conditions of one key from several sources merge; the newest result counts as latest."""
    old = found.conditions.get(key)
    if old is not None:
        times = [t for t in (old.latest, condition.latest) if t is not None]
        condition = replace(merge(old, condition), latest=max(times, default=None))
    found.conditions[key] = condition
