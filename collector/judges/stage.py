"""The judge stage: every tick, the runs stored since the last look are judged by the packs'
`judge` rules, and their results and calls stored.

It runs beside the pipeline, in its own thread, reading the store like the drift scheduler: a
slow or failing judge delays only the judgements (its calls time out, its runs are reviewed),
never ingest, assembly or the other rules. The store is its queue: it follows the runs in the
order they were stored (collector/store/follow.py), so a backlog costs no memory and no run is
passed over, and after a restart it goes back `lookback_seconds` and skips what was judged
already.
"""

from __future__ import annotations

import asyncio
import logging
from datetime import datetime, timedelta
from typing import Any

import aiohttp

from collector.assembler.prices import PriceTable
from collector.clock import Clock, SystemClock
from collector.config.evaluation import JudgesConfig
from collector.evaluation.packs import PackSource, PackText, compiled
from collector.judges.budget import Budget, JudgementCache
from collector.judges.cards import trust
from collector.judges.client import Unavailable, judge
from collector.judges.metrics import JudgeMetrics
from collector.judges.plan import (
    Call,
    Judge,
    Outcome,
    Plan,
    call_row,
    finding_of,
    plan,
    result_rows,
)
from collector.judges.similar import similarity_rows
from collector.replay.load import load_trajectories
from collector.replay.sources import DuckDBSource
from collector.store.database import Database
from collector.store.follow import IN_ORDER, NEW, Follow
from collector.store.reader import Interrupted, Reader, ReadingStage
from collector.store.tables import rows_table
from collector.store.writer import Writer
from collector.ticker import Ticker
from evaluators.judge import JudgeRule, sampled
from evaluators.rulepack import RulePack
from evaluators.similarity import SimilarityRule

log = logging.getLogger(__name__)
STORE_TIMEOUT_SECONDS = 30.0
# The runs stored after the cursor, as rows: most are skipped (no pack selects them, or every
# rule samples them out) without loading their steps.
NEW_RUNS = f"""
SELECT trace_id, closed_at, service_name, agent_name, service_version, store_seq
FROM trajectories
WHERE is_current AND agent_run IS NOT false AND {NEW} AND closed_at >= $oldest
{IN_ORDER}
"""
SCAN_ROWS = 10_000  # run rows looked at per look; `judges.batch` of them are loaded at most
CANCEL_POLL_SECONDS = 0.1
JUDGED = """
SELECT DISTINCT trace_id, revision, pack, rule_id FROM results
WHERE rule_type IN ('judge', 'similarity') AND origin = 'live' AND trace_id IN ?
"""


class JudgeStage(ReadingStage):
    def __init__(
        self,
        config: JudgesConfig,
        database: Database,
        writer: Writer,
        packs: PackSource,
        prices: PriceTable,
        metrics: JudgeMetrics,
        clock: Clock | None = None,
    ) -> None:
        self.config = config
        self.writer = writer
        self.packs = packs
        self.prices = prices
        self.metrics = metrics
        self.clock = clock or SystemClock()
        self.reader = Reader(database)
        self.enabled = config.enabled
        self.ticker = Ticker("sextant-judge", self._pause, self.tick)
        self._behind = False  # the last look left runs to look at: look again at once
        self.cache = JudgementCache(config.cache_entries)
        self._budgets: dict[tuple[str, str], Budget] = {}  # (pack, sha256) -> its budget
        self.follow = Follow()
        self._last_closed: datetime | None = None  # closed_at of the last run looked at

    def _pause(self) -> float:
        return 0.0 if self._behind else self.config.tick_seconds

    def tick(self) -> int:
        """Judge the next runs stored; returns how many results were stored."""
        texts = [t for t in self.packs.snapshot() if layer_three(t)]
        self._behind = False
        if not texts:
            return 0
        now = self.clock.now()
        oldest = now - timedelta(seconds=self.config.lookback_seconds)
        packs = [compiled(t) for t in texts]
        try:
            with self.reader.cursor() as cursor:
                rows = cursor.execute(NEW_RUNS, self.follow.params(oldest, SCAN_ROWS)).fetchall()
                taken, last = self._candidates(rows, packs)
                ids = [row[0] for row in taken]
                trajectories = load_trajectories(DuckDBSource(cursor, "store"), ids)
                done = {tuple(r) for r in cursor.execute(JUDGED, [ids]).fetchall()}
                judges = [j for text in texts for j in self._judges(cursor, text)]
            budgets = self._budgets_of(judges)
            work = plan(trajectories, judges, done, budgets, self.cache, self.clock.monotonic())
            similar = similarity_rows(
                trajectories, [(p, t.sha256) for p, t in zip(packs, texts, strict=True)], done, now
            )
            stored = self._store(work, asyncio.run(self._call_all(work.calls, budgets)), similar)
        except Interrupted:
            return 0  # shutting down: these runs are looked at again after the next start
        if last is not None:
            self.follow.advance(last[5])
            self._last_closed = last[1]
            self._behind = len(rows) == SCAN_ROWS or last is not rows[-1]
        last_closed = self._last_closed if self._behind else None
        self.metrics.lag.set((now - last_closed).total_seconds() if last_closed else 0.0)
        return stored

    def _candidates(
        self, rows: list[tuple[Any, ...]], packs: list[RulePack]
    ) -> tuple[list[tuple[Any, ...]], tuple[Any, ...] | None]:
        """The rows worth loading (at most `judges.batch`) and the last row this look covers
        (every row up to it was looked at, once)."""
        taken: list[tuple[Any, ...]] = []
        covered: tuple[Any, ...] | None = None
        for row in rows:
            if len(taken) == self.config.batch:
                return taken, covered
            if wanted(packs, row, self.metrics):
                taken.append(row)
            covered = row
        return taken, covered

    def _judges(self, cursor: Any, text: PackText) -> list[Judge]:
        pack = compiled(text)
        out = []
        for rule in judge_rules(text):
            assert pack.judges is not None  # a pack with judge rules has them (RulePack)
            model = rule.model or pack.judges.endpoint.model
            trusted = trust(cursor, pack.name, pack.version, rule, model, pack.judges)
            out.append(Judge(pack, text.sha256, rule, trusted))
        return out

    def _budgets_of(self, judges: list[Judge]) -> dict[str, Budget]:
        """Each pack's budget, kept across ticks; a new version of a pack starts a new one."""
        live = {(j.pack.name, j.sha256): j for j in judges}
        for key in set(self._budgets) - set(live):
            del self._budgets[key]
        out = {}
        for key, j in live.items():
            assert j.pack.judges is not None
            out[j.pack.name] = self._budgets.setdefault(key, Budget(j.pack.judges))
        return out

    async def _call_all(self, calls: list[Call], budgets: dict[str, Budget]) -> list[Outcome]:
        if not calls:
            return []
        limits: dict[str, asyncio.Semaphore] = {}
        for call in calls:
            settings = call.judge.pack.judges
            assert settings is not None
            limits.setdefault(call.judge.pack.name, asyncio.Semaphore(settings.concurrency))
        async with aiohttp.ClientSession() as session:
            calls_done = asyncio.gather(
                *(self._call(session, limits[c.judge.pack.name], budgets, c) for c in calls)
            )
            while not calls_done.done():  # shutdown does not wait for a slow judge
                await asyncio.wait({calls_done}, timeout=CANCEL_POLL_SECONDS)
                if self.ticker.stopping.is_set() and not calls_done.done():
                    calls_done.cancel()
                    raise Interrupted
            return calls_done.result()

    async def _call(
        self,
        session: aiohttp.ClientSession,
        limit: asyncio.Semaphore,
        budgets: dict[str, Budget],
        call: Call,
    ) -> Outcome:
        settings = call.judge.pack.judges
        assert settings is not None
        async with limit:
            try:
                reply = await judge(session, settings.endpoint, call.judge.model, call.prompt)
            except Unavailable as exc:
                return Outcome(exc.outcome, error=str(exc))
        if settings.price is not None:
            price = (settings.price.input, settings.price.output)
            cost = PriceTable({call.judge.model: price}).cost(
                call.judge.model, reply.input_tokens, reply.output_tokens
            )
        else:
            cost = self.prices.cost(call.judge.model, reply.input_tokens, reply.output_tokens)
        budgets[call.judge.pack.name].spent(self.clock.monotonic(), cost)
        self.cache.put(call.key, reply.judgement)
        return Outcome(
            "ok",
            reply.judgement,
            None,
            reply.input_tokens,
            reply.output_tokens,
            cost,
            reply.seconds,
        )

    def _store(self, work: Plan, outcomes: list[Outcome], similar: list[dict[str, Any]]) -> int:
        at = self.clock.now()
        results: list[dict[str, Any]] = list(similar)
        calls: list[dict[str, Any]] = []
        made = zip(work.calls, outcomes, strict=True)
        settled = [*work.settled, *((c, c.judge, c.t, o, None) for c, o in made)]
        for call, j, t, outcome, finding in settled:
            if outcome is not None:
                self._count(j, outcome)
                calls.append(call_row(call, j, t, outcome, at))
                finding = finding_of(j, outcome)
            assert finding is not None
            label = outcome.judgement.label if outcome and outcome.judgement else None
            results.extend(result_rows(j, t, finding, label, at))
        if results:
            tables = {"results": rows_table("results", results)}
            if calls:
                tables["judge_calls"] = rows_table("judge_calls", calls)
            self.writer.submit_tables(tables).result(STORE_TIMEOUT_SECONDS)
        return len(results)

    def _count(self, j: Judge, outcome: Outcome) -> None:
        labels = (j.pack.name, j.rule.id, j.model)
        self.metrics.calls.labels(*labels, outcome.outcome).inc()
        if outcome.outcome != "ok":
            return
        if outcome.cost_usd:
            self.metrics.cost.labels(*labels).inc(outcome.cost_usd)
        tokens = (("input", outcome.input_tokens), ("output", outcome.output_tokens))
        for direction, count in tokens:
            if count:
                self.metrics.tokens.labels(*labels, direction).inc(count)
        if outcome.seconds is not None:
            self.metrics.latency.labels(*labels).observe(outcome.seconds)


def judge_rules(text: PackText) -> list[JudgeRule]:
    return [r for r in compiled(text).rules if isinstance(r, JudgeRule)]


def wanted(packs: list[RulePack], row: tuple[Any, ...], metrics: JudgeMetrics) -> bool:
    """Whether some judge or similarity rule may take the run (its pack's selector by target,
    its sample); the rules that sample it out count it."""
    trace_id, _, service, agent, version = row[:5]
    found = False
    for pack in packs:
        if not pack.selector.matches_target(service, agent, version):
            continue
        for rule in pack.rules:
            if not isinstance(rule, JudgeRule | SimilarityRule):
                continue
            if sampled(trace_id, rule.sample):
                found = True
            elif isinstance(rule, JudgeRule):
                metrics.sampled_out.labels(pack.name, rule.id).inc()
    return found


def layer_three(text: PackText) -> bool:
    """Whether the pack has rules this stage runs (judges, similarity)."""
    return any(isinstance(r, JudgeRule | SimilarityRule) for r in compiled(text).rules)
