"""The guard as the receivers call it: the run so far from the assembler, the packs in force,
the target's decision, a deadline, the answer recorded as a step of the run."""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import os
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Any, Protocol

import pyarrow as pa
import pyarrow.compute as pc

from collector.assembler.prices import PriceTable
from collector.clock import Clock, SystemClock
from collector.config.sections import GuardConfig
from collector.evaluation.packs import PackSource, compiled
from collector.guard.call import GuardAnswer, GuardRequest
from collector.guard.check import judge_call
from collector.guard.metrics import GuardMetrics
from collector.guard.record import GuardRecorder, guard_span
from collector.targets import Target
from collector.threads import named_executor
from evaluators.base import Decision
from evaluators.guard import Answer
from evaluators.rulepack import RulePack

log = logging.getLogger(__name__)


class RunSource(Protocol):
    """Where the guard reads a run so far (the assembler)."""

    def run_so_far(self, trace_id: str) -> pa.Table | None: ...


class Journal(Protocol):
    """How far acknowledged spans are loaded (the writer): a run's spans acknowledged to the
    agent may still wait in the journal, and the guard must not judge the run without them."""

    def journal_progress(self) -> tuple[int, int]: ...

    def settled(self) -> concurrent.futures.Future[None]: ...


DecisionOf = Callable[[Target], tuple[Decision, list[str]]]
# Traces whose latest acknowledged spans are remembered with their journal frame: enough for
# every run in progress; an older one forgotten is one whose spans were loaded long ago.
REMEMBERED_TRACES = 100_000


def own_rows(table: pa.Table | None, service: str) -> list[dict[str, Any]]:
    """The run's spans the asking service sent: a guard for one service reads nothing of
    another's, even in a trace they share."""
    if table is None:
        return []
    return table.filter(pc.equal(table["service_name"], service)).to_pylist()


class Guard:
    """Answers guard calls within `deadline_seconds`, on a few threads beside the event loop."""

    def __init__(
        self,
        config: GuardConfig,
        runs: RunSource,
        journal: Journal,
        packs: PackSource,
        decision_of: DecisionOf,
        recorder: GuardRecorder,
        metrics: GuardMetrics,
        prices: PriceTable,
        clock: Clock | None = None,
    ) -> None:
        self.config = config
        self.runs = runs
        self.journal = journal
        self._acked: OrderedDict[str, int] = OrderedDict()  # trace id -> its last frame
        self.packs = packs
        self.decision_of = decision_of
        self.recorder = recorder
        self.metrics = metrics
        self.prices = prices
        self.clock = clock or SystemClock()
        self._threads = named_executor("sextant-guard", config.threads)
        self._pending = 0

    def _packs(self) -> list[RulePack]:
        return [compiled(text) for text in self.packs.snapshot()]

    def acknowledged(self, spans: pa.Table) -> None:
        """Ingest's hook, on the event loop: these spans are acknowledged, in the journal frames
        up to the writer's latest."""
        frame = self.journal.journal_progress()[0]
        if not frame:
            return  # no journal: acknowledged is loaded
        for trace_id in pc.unique(spans["trace_id"]).to_pylist():
            self._acked[trace_id] = frame
            self._acked.move_to_end(trace_id)
        while len(self._acked) > REMEMBERED_TRACES:
            self._acked.popitem(last=False)

    def _wait_for_load(self, trace_id: str) -> None:
        """Until the run's acknowledged spans are loaded (and so held by the assembler)."""
        frame = self._acked.get(trace_id, 0)
        if frame and self.journal.journal_progress()[1] < frame:
            self.journal.settled().result(self.config.deadline_seconds)

    def _judge(self, request: GuardRequest, span_id: str, now_ns: int) -> GuardAnswer:
        """In a guard thread: read the run, weigh it (the decision is read last, freshest)."""
        self._wait_for_load(request.trace_id)
        rows = own_rows(self.runs.run_so_far(request.trace_id), request.service)
        agent = request.agent or next((r["agent_name"] for r in rows if r["agent_name"]), "")
        version = request.version or next(
            (r["service_version"] for r in rows if r["service_version"]), ""
        )
        decision = self.decision_of(Target(request.service, agent or "", version or ""))
        return judge_call(request, rows, self._packs(), decision, span_id, now_ns, self.prices)

    def unavailable(self, request: GuardRequest, span_id: str, reason: str) -> GuardAnswer:
        """The packs' `on_unavailable` (deny when one of them says deny; deny with none)."""
        self.metrics.timeouts.labels(reason).inc()
        service, agent, version = request.service, request.agent, request.version
        chosen = [p for p in self._packs() if p.selector.matches_target(service, agent, version)]
        answers = {p.guard.on_unavailable for p in chosen}
        answer = Answer.ALLOW if chosen and answers == {Answer.ALLOW} else Answer.DENY
        message = f"the guard could not judge the call ({reason}); guard.on_unavailable"
        return GuardAnswer(answer, [f"guard_unavailable_{reason}"], [], [message], span_id)

    async def check(self, request: GuardRequest, protocol: str) -> GuardAnswer:
        """The answer, within the deadline whatever happens; recorded as a step of the run."""
        started = time.perf_counter()
        self.metrics.calls.labels(protocol).inc()
        span_id = os.urandom(8).hex()
        start_ns = int(self.clock.wall() * 1e9)
        basis = "judged"
        if self._pending >= self.config.max_pending:
            answer, basis = self.unavailable(request, span_id, "overloaded"), "unavailable"
        else:
            self._pending += 1
            loop = asyncio.get_running_loop()
            work = loop.run_in_executor(self._threads, self._judge, request, span_id, start_ns)
            work.add_done_callback(self._done)
            try:
                answer = await asyncio.wait_for(asyncio.shield(work), self.config.deadline_seconds)
                if "guard_run_unknown" in answer.reasons or "guard_run_partial" in answer.reasons:
                    basis = "unknown"
            except TimeoutError:
                answer, basis = self.unavailable(request, span_id, "deadline"), "unavailable"
            except Exception as exc:
                log.exception("guard call raised: %s", exc)
                answer, basis = self.unavailable(request, span_id, "error"), "unavailable"
        self.metrics.answers.labels(answer.answer.value, basis).inc()
        end_ns = int(self.clock.wall() * 1e9)
        parent = answer.parent_span_id or request.parent_span_id
        self.recorder.record(request, guard_span(request, answer, parent, start_ns, end_ns))
        self.metrics.duration.observe(time.perf_counter() - started)
        return answer

    def _done(self, _: object) -> None:
        self._pending -= 1

    async def shutdown(self) -> None:
        """Store the steps still gathered; judgements in flight are let go."""
        await self.recorder.flush()
        self._threads.shutdown(wait=False, cancel_futures=True)
