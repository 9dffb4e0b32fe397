"""The judge stage: every tick, the runs stored since the last look are judged by the packs'
`judge` rules, and their results and calls stored.

It runs beside the pipeline, in its own thread, reading the store like the drift scheduler: a
slow or failing judge delays only the judgements (its calls time out, its runs are reviewed),
never ingest, assembly or the other rules. The store is its queue: each pack follows the runs in
the order they were stored (collector/store/follow.py) with a place of its own, so a backlog
costs no memory and no run is passed over, and after a restart it goes back
`lookback_seconds` and skips what was judged already (as does a pack added or renamed by a
reload: it has no place yet).

Packs do not wait on each other: a look hands its calls to the judges' event loop (calls.py)
and goes on; each call's result is stored when its answer comes. A pack whose judge is behind
(a look's worth of calls still waiting) is skipped by the next looks until it catches up, and
only its cursor waits.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Coroutine
from datetime import datetime, timedelta
from typing import Any

import pyarrow as pa

from collector.assembler.prices import PriceTable
from collector.clock import Clock, SystemClock
from collector.config.evaluation import JudgesConfig
from collector.evaluation.packs import PackSource, PackText, compiled
from collector.judges.asking import Asker
from collector.judges.budget import Budget, JudgementCache
from collector.judges.calls import CallLoop
from collector.judges.cards import trust
from collector.judges.metrics import JudgeMetrics
from collector.judges.plan import (
    Call,
    Judge,
    Outcome,
    call_row,
    finding_of,
    plan,
    result_rows,
)
from collector.judges.similar import similarity_rows
from collector.store.database import Database
from collector.store.follow import IN_ORDER, NEW, Follow
from collector.store.reader import Interrupted, Reader, ReadingStage
from collector.store.runs import DuckDBSource, load_trajectories
from collector.store.tables import rows_table
from collector.store.writer import Writer
from collector.ticker import Ticker
from evaluators.base import Finding
from evaluators.judge import JudgeRule, sampled
from evaluators.model import Trajectory
from evaluators.rulepack import RulePack
from evaluators.similarity import SimilarityRule

log = logging.getLogger(__name__)
# The runs stored after the cursor, as rows: most are skipped (no pack selects them, or every
# rule samples them out) without loading their steps.
NEW_RUNS = f"""
SELECT trace_id, closed_at, service_name, agent_name, service_version, store_seq
FROM trajectories
WHERE is_current AND agent_run IS NOT false AND {NEW} AND closed_at >= $oldest
{IN_ORDER}
"""
SCAN_ROWS = 10_000  # run rows looked at per look; `judges.batch` of them are loaded at most
JUDGED = """
SELECT DISTINCT trace_id, revision, pack, rule_id FROM results
WHERE rule_type IN ('judge', 'similarity') AND origin = 'live' AND trace_id IN ?
"""


Settled = tuple[Call | None, Judge, Trajectory, Outcome | None, Finding | None]


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
        self.calls = CallLoop("sextant-judge-calls")
        self._behind = False  # the last look left runs to look at: look again at once
        self.cache = JudgementCache(config.cache_entries)
        self.asker = Asker(self.calls, self.cache, prices, self.clock)
        self._budgets: dict[tuple[str, str], Budget] = {}  # (pack, sha256) -> its budget
        # pack -> its place among the runs stored, and closed_at of the last run it looked at
        self._follows: dict[str, Follow] = {}
        self._last_closed: dict[str, datetime] = {}
        # On the calls' loop only: calls planned and not yet stored, per pack.
        self._pending: dict[str, int] = {}
        # Set on the calls' loop, taken by the next look: per pack, the lowest store_seq of a
        # run whose judge result failed to store (its pack's cursor goes back to it).
        self._lost: dict[str, int] = {}
        self._lost_lock = threading.Lock()

    def start(self) -> None:
        if self.enabled:
            self.calls.start()
        super().start()

    def shutdown(self, deadline: float) -> None:
        super().shutdown(deadline)
        self.calls.shutdown(deadline)

    def threads(self) -> list[Any]:
        return [*super().threads(), *self.calls.threads()]

    def consume(self, tables: dict[str, pa.Table], received_at: datetime) -> None:
        """Commit hook (the writer's thread): runs were stored, so look now rather than at
        the next tick; the look reads them through each pack's place (the tick stays, for
        what a failed look left)."""
        if self.enabled and "trajectories" in tables:
            self.ticker.wake()

    def _pause(self) -> float:
        return 0.0 if self._behind else self.config.tick_seconds

    def tick(self) -> int:
        """Look at the next runs stored, pack by pack; returns how many results were stored
        by the look (the calls' results are stored as their answers come)."""
        texts = [t for t in self.packs.snapshot() if layer_three(t)]
        self._behind = False
        lag = 0.0
        now = self.clock.now()
        oldest = now - timedelta(seconds=self.config.lookback_seconds)
        names = {compiled(t).name for t in texts}
        for name in set(self._follows) - names:
            del self._follows[name]
            self._last_closed.pop(name, None)
        for key in [k for k in self._budgets if k[0] not in names]:
            del self._budgets[key]
        stored = 0
        failed: list[str] = []
        for text in texts:
            name = compiled(text).name
            self._follows.setdefault(name, Follow())
            last_closed = self._last_closed.get(name, oldest)
            if self._pending.get(name, 0) >= self.config.batch:
                # Its judge is behind: its runs wait for it, no other pack's do; its lag is
                # the most of anyone's.
                lag = max(lag, (now - last_closed).total_seconds())
                continue
            try:
                done, behind = self._look(text, now, oldest)
            except Interrupted:
                return stored  # shutting down: looked at again after the next start
            except Exception:  # its cursor stays: its runs are looked at again next tick
                if not failed:  # one line a tick, however many packs fail
                    log.exception("judge pack %s: look failed; retried next tick", name)
                failed.append(name)
                continue
            stored += done
            if behind:
                self._behind = True
                last_closed = self._last_closed.get(name, oldest)
                lag = max(lag, (now - last_closed).total_seconds())
        if len(failed) > 1:
            log.warning("judge packs whose look failed this tick: %s", ", ".join(failed))
        self.metrics.lag.set(lag)
        return stored

    def _look(self, text: PackText, now: datetime, oldest: datetime) -> tuple[int, bool]:
        """One pack's next runs: calls handed to the loop, the rest stored; returns what was
        stored and whether runs are left to look at."""
        pack = compiled(text)
        follow = self._follows[pack.name]
        with self._lost_lock:
            lost = self._lost.pop(pack.name, None)
        if lost is not None:
            follow.rewind(lost)
        with self.reader.cursor() as cursor:
            rows = cursor.execute(NEW_RUNS, follow.params(oldest, SCAN_ROWS)).fetchall()
            taken, last = self._candidates(rows, [pack])
            ids = [row[0] for row in taken]
            trajectories = load_trajectories(DuckDBSource(cursor, "store"), ids)
            done = {tuple(r) for r in cursor.execute(JUDGED, [ids]).fetchall()}
            judges = self._judges(cursor, text)
        settled: list[Settled] = []
        if judges and trajectories:
            budgets = self._budgets_of(pack.name, text.sha256, judges)
            seqs = {row[0]: row[5] for row in taken}
            settled = self.calls.run(
                lambda: self._dispatch(trajectories, judges, done, budgets, seqs)
            )
        similar = similarity_rows(trajectories, [(pack, text.sha256)], done, now)
        stored = self._store(settled, similar)
        if last is not None:
            follow.advance(last[5])
            self._last_closed[pack.name] = last[1]
        return stored, last is not None and (len(rows) == SCAN_ROWS or last is not rows[-1])

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

    def _budgets_of(self, name: str, sha256: str, judges: list[Judge]) -> dict[str, Budget]:
        """The pack's budget, kept across looks; a new version of a pack starts a new one."""
        for key in [k for k in self._budgets if k[0] == name and k[1] != sha256]:
            del self._budgets[key]
        settings = judges[0].pack.judges
        assert settings is not None
        return {name: self._budgets.setdefault((name, sha256), Budget(settings))}

    # On the calls' loop from here on.

    def _dispatch(
        self,
        trajectories: list[Trajectory],
        judges: list[Judge],
        done: set[tuple[str, int, str, str]],
        budgets: dict[str, Budget],
        seqs: dict[str, int],
    ) -> list[Settled]:
        """Plan the look's judgements and start its calls; returns what needs no call."""
        now = self.clock.monotonic()
        work = plan(
            trajectories,
            judges,
            done,
            budgets,
            self.cache,
            now,
            self.asker.estimate,
            self.asker.flights,
        )
        for call in work.calls:
            name = call.judge.pack.name
            self._pending[name] = self._pending.get(name, 0) + 1
            answer = self.asker.answer(call, budgets[name])
            self.calls.spawn(self._finish(call, answer, seqs[call.t.trace_id]))
        return work.settled

    async def _finish(self, call: Call, answer: Coroutine[Any, Any, Outcome], seq: int) -> None:
        """Store the call's result and its call row once the answer has come. A result that
        fails to store sends the pack's cursor back to its run (`seq`): the run is judged
        again (its judgement cached, at no cost) by the next look."""
        name = call.judge.pack.name
        try:
            try:
                outcome = await answer
            except Exception as exc:  # the run is reviewed, not judged again (and paid again)
                log.exception("judge call for %s failed", call.t.trace_id)
                outcome = Outcome("provider_error", error=f"{type(exc).__name__}: {exc}")
            tables = self._rows([(call, call.judge, call.t, outcome, None)], [])
            if tables:
                await asyncio.wrap_future(self.writer.submit_tables(tables))
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("judge result of %s not stored; judged again", call.t.trace_id)
            with self._lost_lock:
                self._lost[name] = min(self._lost.get(name, seq), seq)
            self.ticker.wake()
        finally:
            self._pending[name] -= 1
            if self._pending[name] == self.config.batch - 1:
                self.ticker.wake()  # the pack had been skipped: look at its runs again

    # On either thread.

    def _store(self, settled: list[Settled], similar: list[dict[str, Any]]) -> int:
        tables = self._rows(settled, similar)
        if tables:
            self.writer.record(tables, self.ticker.stopping)
        return len(tables["results"]) if tables else 0

    def _rows(self, settled: list[Settled], similar: list[dict[str, Any]]) -> dict[str, pa.Table]:
        at = self.clock.now()
        results: list[dict[str, Any]] = list(similar)
        calls: list[dict[str, Any]] = []
        for call, j, t, outcome, finding in settled:
            if outcome is not None:
                self._count(j, outcome)
                calls.append(call_row(call, j, t, outcome, at))
                finding = finding_of(j, outcome)
            assert finding is not None
            label = outcome.judgement.label if outcome and outcome.judgement else None
            results.extend(result_rows(j, t, finding, label, at))
        tables: dict[str, pa.Table] = {}
        if results:
            tables["results"] = rows_table("results", results)
            if calls:
                tables["judge_calls"] = rows_table("judge_calls", calls)
        return tables

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
