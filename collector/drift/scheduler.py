"""Runs the window rules of the packs in force, each every `interval`, and stores the results."""

from __future__ import annotations

import logging
import time
from datetime import datetime
from typing import Any

import duckdb

from collector.clock import Clock, SystemClock, naive_utc
from collector.config.evaluation import DriftConfig
from collector.drift.evaluate import evaluate_drift
from collector.drift.metrics import DriftMetrics
from collector.drift.outcome import EVALUATION_ERROR, WindowOutcome
from collector.drift.reliability import evaluate_reliability
from collector.drift.resharding import resharded
from collector.evaluation.packs import PackSource, compiled
from collector.evaluation.results import window_result_row
from collector.store.database import Database
from collector.store.reader import Interrupted, Reader, ReadingStage
from collector.store.tables import rows_table
from collector.store.writer import Writer
from collector.targets import Target, label_values
from collector.ticker import Ticker
from evaluators.rulepack import RulePack
from evaluators.window import DriftRule, ReliabilityRule

log = logging.getLogger(__name__)


class DriftScheduler(ReadingStage):
    """A rule is first evaluated one `interval` after it is loaded, then every `interval`."""

    def __init__(
        self,
        config: DriftConfig,
        database: Database,
        writer: Writer,
        packs: PackSource,
        metrics: DriftMetrics,
        clock: Clock | None = None,
        peers: tuple[list[str], str | None] = ([], None),
    ) -> None:
        self.config = config
        # The other replicas and the token for them: a service may move between replicas.
        self.peers, self.peer_token = peers
        self.database = database
        self.writer = writer
        self.packs = packs
        self.metrics = metrics
        self.clock = clock or SystemClock()
        self.ticker = Ticker("sextant-drift", config.tick_seconds, self.tick)
        self.reader = Reader(database)
        self.enabled = config.enabled
        self._due: dict[tuple[str, str, str], float] = {}  # (pack sha, pack, rule) -> due time

    def tick(self) -> int:
        """Evaluate the rules that are due; returns how many ran."""
        now = self.clock.wall()
        ran = 0
        live: set[tuple[str, str, str]] = set()
        for text in self.packs.snapshot():
            pack = compiled(text)
            for rule in pack.rules:
                if not isinstance(rule, DriftRule | ReliabilityRule):
                    continue  # evaluated per trajectory by the assembler's rounds
                if self.ticker.stopping.is_set():
                    return ran  # shutting down: the rules left wait for the next start
                key = (text.sha256, pack.name, rule.id)
                live.add(key)
                if key not in self._due:  # at 0 an interval before its first run can fail
                    self.metrics.evaluations.labels(pack.name, rule.id, "error")
                due = self._due.setdefault(key, now + rule.interval)
                if now >= due:
                    self._due[key] = now + rule.interval
                    self.run(pack, text.sha256, rule, now)
                    ran += 1
        for key in set(self._due) - live:  # edited or removed: forget the old version's clock
            del self._due[key]
        return ran

    def run(
        self, pack: RulePack, sha256: str, rule: DriftRule | ReliabilityRule, now: float
    ) -> list[dict[str, Any]]:
        """Evaluate one rule over every target it selects and store the results."""
        at = naive_utc(now)
        started = time.perf_counter()
        log.debug("window rule %s/%s: evaluating", pack.name, rule.id)
        try:
            with self.reader.cursor() as cursor:
                outcomes = self.evaluate(cursor, pack, rule, at)
        except Interrupted:
            log.info("window rule %s/%s abandoned: shutting down", pack.name, rule.id)
            return []
        except Exception:
            log.exception("window rule %s/%s failed; retried next interval", pack.name, rule.id)
            self.metrics.evaluations.labels(pack.name, rule.id, "error").inc()
            return []
        self.metrics.duration.observe(time.perf_counter() - started)
        failed = [o for o in outcomes if o.reason == EVALUATION_ERROR]
        if failed:  # one line a round, however many targets
            log.warning(
                "window rule %s/%s: %d target(s) not evaluated (reviewed), first: %s",
                pack.name,
                rule.id,
                len(failed),
                failed[0].message,
            )
        outcomes = resharded(outcomes, self.peers, self.peer_token)
        rows = [window_result_row(pack, sha256, rule, o, at) for o in outcomes]
        for outcome in outcomes:
            self.metrics.evaluations.labels(pack.name, rule.id, outcome.verdict.value).inc()
        if rows:
            table = rows_table("results", rows)
            self.writer.record({"results": table}, self.ticker.stopping)
        return rows

    def evaluate(
        self,
        cursor: duckdb.DuckDBPyConnection,
        pack: RulePack,
        rule: DriftRule | ReliabilityRule,
        at: datetime,
    ) -> list[WindowOutcome]:
        limit = self.config.max_evidence
        labels = (pack.name, rule.id)
        if isinstance(rule, DriftRule):
            outcomes = evaluate_drift(cursor, pack.selector, rule, at, limit, self.reader)
            for o in outcomes:
                shown = Target(*label_values(o.target))
                if not self.metrics.shown(shown):
                    continue
                target = (*labels, *shown, o.metric)
                self.metrics.effect_size.labels(*target).set(o.effect_size or 0.0)
                self.metrics.p_value.labels(*target).set(o.p_value if o.p_value is not None else 1)
            return outcomes
        judged = evaluate_reliability(cursor, pack.selector, rule, at, limit, self.reader)
        for _, found in judged:
            shown = Target(*label_values(found.target))
            if not self.metrics.shown(shown):
                continue
            target = (*labels, *shown, str(rule.k))
            for gauge, value in (
                (self.metrics.pass_at_k, found.pass_at(rule.k)),
                (self.metrics.pass_hat_k, found.pass_hat(rule.k)),
            ):
                if value is not None:
                    gauge.labels(*target).set(value)
        return [outcome for outcome, _ in judged]
