"""The guard as the receivers call it: the run so far from the assembler, the packs in force,
the target's decision, a deadline, the answer recorded as a step of the run."""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import random
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Any, Protocol

import pyarrow as pa
import pyarrow.compute as pc

from collector.assembler.grow import GrownRun
from collector.assembler.held import RunSoFar
from collector.assembler.prices import PriceTable
from collector.clock import Clock, SystemClock
from collector.config.guard import GuardConfig
from collector.evaluation.packs import PackSource, compiled
from collector.guard.ahead import KeptAhead
from collector.guard.call import GuardAnswer, GuardRequest
from collector.guard.check import judge_call
from collector.guard.conversation import NOT_HELD, Conversations
from collector.guard.metrics import GuardMetrics
from collector.guard.native_judge import NativeJudge, decision_reader
from collector.guard.record import RECORDED, GuardRecorder, guard_span
from collector.guard.session_rules import asks_sessions
from collector.targets import Target
from collector.threads import named_executor
from evaluators.base import Decision
from evaluators.guard import Answer
from evaluators.rulepack import RulePack

log = logging.getLogger(__name__)


class RunSource(Protocol):
    """Where the guard reads a run so far (the assembler)."""

    def held_run(self, trace_id: str) -> RunSoFar | None: ...

    def run_so_far(self, trace_id: str) -> list[dict[str, Any]]: ...


class Journal(Protocol):
    """How far acknowledged spans are loaded (the writer): a run's spans acknowledged to the
    agent may still wait in the journal, and the guard must not judge the run without them."""

    def journal_progress(self) -> tuple[int, int]: ...

    def settled(self) -> concurrent.futures.Future[None]: ...


DecisionOf = Callable[[Target], tuple[Decision, list[str]]]
# Traces whose latest acknowledged spans are remembered with their journal frame until it is
# loaded, at most: an older one forgotten is one whose spans were loaded long ago.
REMEMBERED_TRACES = 100_000
# Runs kept built between calls, the least recently asked let go: the runs being asked about at
# once (a run of 40 spans kept built holds about 65 KiB beside its rows; one let go is built
# whole at its next call).
GROWN_RUNS = 1_024


def new_span_id() -> str:
    """A random span id, never all zeros, as the OTel SDKs make them: from Python's generator,
    not a system call (on the event loop, a system call is a moment for the kernel to run
    another thread instead)."""
    return f"{random.getrandbits(64) or 1:016x}"


def own_rows(rows: list[dict[str, Any]], service: str) -> list[dict[str, Any]]:
    """The run's spans the asking service sent: a guard for one service reads nothing of
    another's, even in a trace they share."""
    return [row for row in rows if row["service_name"] == service]


class KeptRun:
    """A run kept built between calls, with the held rows it was built or last grown from."""

    __slots__ = ("run", "seen")

    def __init__(self, run: GrownRun, held: RunSoFar) -> None:
        self.run, self.seen = run, held

    def grow(self, held: RunSoFar, service: str) -> bool:
        """Take in the rows of `service` read since; False when the run must be built whole
        (the rows were read anew, or a new span does not land at the run's end)."""
        seen, self.seen = self.seen, held
        if held.rows is not seen.rows or held.count < seen.count:
            return False
        new = [r for r in held.rows[seen.count : held.count] if r["service_name"] == service]
        return self.run.grow_by(new)


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
        conversations: Conversations | None = None,
        native: NativeJudge | None = None,
    ) -> None:
        """`native`: the judgement in native code, for the runs kept there (None: Python's)."""
        self.config = config
        self.conversations = conversations  # the runs' sessions, for the session rules
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
        self._built: OrderedDict[tuple[str, str], KeptRun] = OrderedDict()
        self._pending = 0
        self.native = native
        self.ahead = None
        if native is not None:
            self.ahead = KeptAhead(
                native, self._loaded, self._adopt, packs.snapshot, metrics.kept_ahead
            )

    def recover(self) -> None:
        """At a start, after the journal's replay: what was in flight before the stop."""
        if self.conversations is not None:
            self.conversations.recover()

    def _packs(self) -> list[RulePack]:
        return [compiled(text) for text in self.packs.snapshot()]

    def acknowledged(self, spans: pa.Table, protocol: str) -> None:
        """Ingest's hook, on the event loop: these spans are acknowledged, in the journal frames
        up to the writer's latest. The guard's own steps are not waited for: a run is judged
        on what the agent did, and waiting for each answer's step would serialize the calls."""
        if self.native is not None:
            self.native.acknowledged(spans)  # the guard's own steps too: they are the run's
        if protocol == RECORDED:
            return
        if self.ahead is not None:
            self.ahead.seen(spans)
        if self.conversations is not None:
            self.conversations.seen(spans)
        frame, loaded = self.journal.journal_progress()
        if not frame:
            return  # no journal: acknowledged is loaded
        acked = self._acked
        for trace_id in pc.unique(spans["trace_id"]).to_pylist():
            acked[trace_id] = frame
            acked.move_to_end(trace_id)
        # in the order acknowledged, so in frame order: the loaded ones first, let go
        while acked and (len(acked) > REMEMBERED_TRACES or next(iter(acked.values())) <= loaded):
            acked.popitem(last=False)

    def _loaded(self, trace_id: str) -> bool:
        """Whether the run's acknowledged spans are all loaded (and so held by the assembler)."""
        frame = self._acked.get(trace_id, 0)
        return not frame or self.journal.journal_progress()[1] >= frame

    def _judge(
        self,
        request: GuardRequest,
        span_id: str,
        now_ns: int,
        held: RunSoFar | None = None,
        since: int | None = None,
    ) -> GuardAnswer | None:
        """Read the run (unless `held` is it; kept natively from then on with the batches
        acknowledged after the `since`-th) and its conversation, weigh it (the decision is
        read last, freshest). In a guard thread, unless the run is held in memory: then on the
        event loop, where it takes well under a millisecond and two hand-overs of the GIL cost
        more; None there when the conversation's turns must be read from the store."""
        in_memory = held is not None
        grown = None
        if held is None:
            if not self._loaded(request.trace_id):
                self.journal.settled().result(self.config.deadline_seconds)
            trace_id = request.trace_id
            run = self.runs.run_so_far(trace_id)
            native = self.native
            if native is not None and since is not None and run and not native.kept(trace_id):
                native.adopt(trace_id, run, since)
            rows = own_rows(run, request.service)
            self.metrics.had_run("read")
        else:
            grown, rows = self._grown(request, held)
        agent = request.agent or next((r["agent_name"] for r in rows if r["agent_name"]), "")
        version = request.version or next(
            (r["service_version"] for r in rows if r["service_version"]), ""
        )
        packs = self._packs()
        conversation = None
        if self.conversations is not None and asks_sessions(packs, request.service):
            conversation = self.conversations.of(request, rows, read=not in_memory)
            if conversation is NOT_HELD:
                return None
        decision = self.decision_of(Target(request.service, agent or "", version or ""))
        return judge_call(
            request, rows, packs, decision, span_id, now_ns, self.prices, grown, conversation
        )

    def _judge_natively(
        self, request: GuardRequest, span_id: str, now_ns: int
    ) -> GuardAnswer | None:
        """The call weighed natively, on the event loop, when the run is kept natively and the
        packs' guard rules are all native; None: weighed in Python. A kept run holds every span
        acknowledged of it, so it needs no wait for the journal's load."""
        native = self.native
        assert native is not None
        if not native.kept(request.trace_id):
            return None
        gen = native.runs.packs_gen()  # before the packs are read: see `in_force`
        _, natives = native.in_force(self.packs.snapshot(), gen)
        if natives is None:
            return None
        if self.conversations is not None and native.asks_sessions(request.service):
            return None
        answer = native.answer(request, self.decision_of, span_id, now_ns)
        if answer is not None:
            self.metrics.had_run("native")
        return answer

    def _judge_read(
        self, request: GuardRequest, span_id: str, now_ns: int, since: int | None
    ) -> GuardAnswer:
        """In a guard thread: everything the call needs may be read from the store."""
        answer = self._judge(request, span_id, now_ns, since=since)
        assert answer is not None  # only a run held in memory leaves its conversation unread
        return answer

    def _grown(
        self, request: GuardRequest, held: RunSoFar
    ) -> tuple[GrownRun | None, list[dict[str, Any]]]:
        """The run kept from the previous call about it, grown by the rows read since (on the
        event loop only: growing changes the kept run), else built whole and kept; with the
        service's rows it is built from. A kept run is grown without a pass over its earlier
        rows, so a call costs the same at the run's fortieth step as at its fourth."""
        key = (request.trace_id, request.service)
        kept = self._built.pop(key, None)
        grown: GrownRun | None
        if kept is not None and kept.grow(held, request.service):
            grown, rows = kept.run, kept.run.rows
            self.metrics.had_run("grown")
        else:
            self.metrics.had_run("built")
            rows = own_rows(held.as_list(), request.service)
            grown = GrownRun.build(request.trace_id, rows, self.prices)
            kept = None if grown is None else KeptRun(grown, held)
        if kept is not None:
            self._built[key] = kept
            while len(self._built) > GROWN_RUNS:
                self._built.popitem(last=False)
        return grown, rows

    def unavailable(self, request: GuardRequest, span_id: str, reason: str) -> GuardAnswer:
        """The packs' `on_unavailable` (deny when one of them says deny; deny with none)."""
        self.metrics.timeouts.labels(reason).inc()
        service, agent, version = request.service, request.agent, request.version
        chosen = [p for p in self._packs() if p.selector.matches_target(service, agent, version)]
        answers = {p.guard.on_unavailable for p in chosen}
        answer = Answer.ALLOW if chosen and answers == {Answer.ALLOW} else Answer.DENY
        message = f"the guard could not judge the call ({reason}); guard.on_unavailable"
        return GuardAnswer(answer, [f"guard_unavailable_{reason}"], [], [message], span_id)

    def listener(self, tokens: list[bytes]) -> Any:
        """What the native gRPC listener answers calls with (the runs kept natively), told the
        OTLP listener's `tokens`; None when calls are not answered there: no native judgement,
        or a clock of the guard's own (its steps are timed by it, the listener's by the
        system's)."""
        if self.native is None or not isinstance(self.clock, SystemClock):
            return None
        decision_of = decision_reader(self.decision_of)  # in a listener thread, with the GIL
        self.native.runs.listen(tokens, self.conversations is not None, self._adopt, decision_of)
        if self.ahead is not None:  # kept when, and only when, the judgement is native
            self.ahead.record_every(self.answered_by_listener)
        return self.native.runs

    def _adopt(self, trace_id: str) -> bool:
        """In a listener thread, with the GIL: keep the run natively when the assembler holds
        every span of it acknowledged (else its call goes to the event loop, as before). The
        batches acknowledged meanwhile, on the loop, are taken too (`begin_read`)."""
        native = self.native
        assert native is not None
        since = native.runs.begin_read()
        try:
            if not self._loaded(trace_id):
                return False
            held = self.runs.held_run(trace_id)
            return held is not None and native.adopt(trace_id, held.as_list(), since)
        except Exception:
            log.exception("keeping run %s natively failed", trace_id)
            return False
        finally:
            native.runs.end_read(since)

    def answered_by_listener(self) -> None:
        """On the event loop: the calls the native listeners answered since the last
        look, recorded as steps of their runs and counted, as `check` does for its own."""
        if self.ahead is not None:  # kept when, and only when, the judgement is native
            for service in self.ahead.native.record_answered(self.metrics, self.recorder):
                self.ahead.asked(service)

    async def check(self, request: GuardRequest, protocol: str) -> GuardAnswer:
        """The answer, within the deadline whatever happens; recorded as a step of the run."""
        started = time.perf_counter()
        self.metrics.called(protocol)
        if self.ahead is not None:
            self.ahead.asked(request.service)
        span_id = new_span_id()
        start_ns = int(self.clock.wall() * 1e9)
        try:
            answer, basis = await self._answer(request, span_id, start_ns)
        except Exception as exc:
            log.exception("guard call raised: %s", exc)
            answer, basis = self.unavailable(request, span_id, "error"), "unavailable"
        self.metrics.gave(answer, basis)
        end_ns = int(self.clock.wall() * 1e9)
        parent = answer.parent_span_id or request.parent_span_id
        self.recorder.record(request, guard_span(request, answer, parent, start_ns, end_ns))
        self.metrics.duration.observe(time.perf_counter() - started)
        return answer

    async def _answer(
        self, request: GuardRequest, span_id: str, start_ns: int
    ) -> tuple[GuardAnswer, str]:
        """A run held in memory is judged at once on the event loop (well under a millisecond:
        two hand-overs of the GIL to a thread would cost more); one read from the store, or
        waiting for its acknowledged spans to load, in a guard thread within the deadline."""
        started = time.perf_counter()
        native = self.native
        if native is not None:
            judged = self._judge_natively(request, span_id, start_ns)
            if judged is not None:
                return judged, "judged"
        held = self.runs.held_run(request.trace_id) if self._loaded(request.trace_id) else None
        if held is not None:
            if native is not None and not native.kept(request.trace_id):
                # kept natively from here on (its spans loaded are all those acknowledged), and
                # weighed so at once: the native listeners answer the run's next calls
                native.adopt(request.trace_id, held.as_list(), native.runs.seq())
                judged = self._judge_natively(request, span_id, start_ns)
                if judged is not None:
                    return judged, "judged"
            answer = self._judge(request, span_id, start_ns, held)
            if answer is not None:
                return answer, "judged"
        if self._pending >= self.config.max_pending:
            return self.unavailable(request, span_id, "overloaded"), "unavailable"
        self._pending += 1
        loop = asyncio.get_running_loop()
        # batches acknowledged while the run is read are remembered, to keep it natively
        since = None if self.native is None else self.native.runs.begin_read()
        work = loop.run_in_executor(
            self._threads, self._judge_read, request, span_id, start_ns, since
        )
        work.add_done_callback(lambda _: self._done(since))
        try:
            answer = await asyncio.wait_for(asyncio.shield(work), self.config.deadline_seconds)
        except TimeoutError:
            return self.unavailable(request, span_id, "deadline"), "unavailable"
        if time.perf_counter() - started > self.config.deadline_seconds:
            # the thread's answer and the timer came due in one turn of the loop: the answer
            # arrived late all the same, and the pack said what a late call gets
            return self.unavailable(request, span_id, "deadline"), "unavailable"
        return answer, "judged"

    def _done(self, since: int | None) -> None:
        self._pending -= 1
        if self.native is not None and since is not None:
            self.native.runs.end_read(since)

    async def shutdown(self) -> None:
        """Store the steps still gathered (those the native listeners answered too); judgements in
        flight are let go."""
        self.answered_by_listener()
        if self.ahead is not None:
            self.ahead.stop()
        if self.native is not None:
            self.native.runs.stop_listening()
        await self.recorder.flush()
        self._threads.shutdown(wait=False, cancel_futures=True)
