"""The guard's judgement in native code (collector/native/guard_judge.rs): the runs asked
about kept as native rows, grown by every acknowledged batch, and weighed by the native
builder and rule interpreter without a Python object per step. `check.py` stays the
specification: tests/unit/guard/test_native_judge.py holds the two equal, and whatever the
native side does not weigh as Python does is left to Python, call by call."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import pyarrow as pa

from collector.assembler.prices import PriceTable
from collector.evaluation.native_round import native_pack
from collector.evaluation.packs import PackText
from collector.guard.call import GuardAnswer, GuardRequest, ProposedCall
from collector.guard.check import guard_rules, proposed_row
from collector.guard.metrics import GuardMetrics
from collector.guard.record import GuardRecorder, guard_span
from collector.guard.session_rules import asks_sessions, guard_session_rules
from collector.normalize.native import native
from collector.targets import Target
from evaluators.base import Decision
from evaluators.guard import Answer
from evaluators.rulepack import RulePack

SERVICES_REMEMBERED = 10_000  # services whose asking of session rules is kept per snapshot


def decision_reader(
    decision_of: Callable[[Target], tuple[Decision, list[str]]],
) -> Callable[[str, str, str], tuple[str, list[str]]]:
    """`decision_of` as the native side asks it: by service, agent and version, the decision
    as its value (PASS, DISABLE...) with the reasons that fire."""

    def read(service: str, agent: str, version: str) -> tuple[str, list[str]]:
        found, fired = decision_of(Target(service, agent, version))
        return found.value, fired

    return read


class NativeJudge:
    """The runs kept natively (at most `most`, the least recently asked let go; a run of more
    than `most_spans` spans is not kept) and the packs in their native form."""

    def __init__(self, prices: PriceTable, most: int, most_spans: int) -> None:
        self.runs = native.GuardRuns(most, most_spans, prices.in_lookup_order())
        self._texts: Sequence[PackText] | None = None
        self._in_force: tuple[list[RulePack], list[Any] | None] = ([], None)
        self._sessions: dict[str, bool] = {}
        self._told: int | None = None  # the packs' generation the native side was told

    def in_force(
        self, texts: Sequence[PackText], gen: int | None = None
    ) -> tuple[list[RulePack], list[Any] | None]:
        """The packs and their native forms (None when a guard rule of one is not native),
        read once for each snapshot of the packs in force (`texts`, the same object until a
        pack changes): on every call they cost a tenth of it. The native side is told them
        with the generation `gen` of the packs (`runs.packs_gen()`, read before `texts`), so
        that packs read before a change are never used after it."""
        gen = self.runs.packs_gen() if gen is None else gen
        if texts is not self._texts:
            made = [native_pack(text) for text in texts]
            whole = all({r.id for r in guard_rules(m.pack)} <= set(m.native.rule_ids) for m in made)
            natives = [m.native for m in made] if whole else None
            self._texts, self._in_force = texts, ([m.pack for m in made], natives)
            self._sessions = {}
            self._told = None
        if gen != self._told:
            packs, natives = self._in_force
            settings = [
                (g.writes, g.on_unknown.value, str(g.quarantine), bool(guard_session_rules(p)))
                for p in packs
                for g in [p.guard]
            ]
            current = self.runs.set_packs(gen, natives, settings)
            self._told = gen if current else None  # told again when the packs changed since
        return self._in_force

    def asks_sessions(self, service: str) -> bool:
        """Whether a pack in force that may select the service's runs asks session rules."""
        found = self._sessions.get(service)
        if found is None:
            if len(self._sessions) >= SERVICES_REMEMBERED:
                self._sessions.clear()
            found = self._sessions[service] = asks_sessions(self._in_force[0], service)
        return found

    def acknowledged(self, spans: pa.Table) -> None:
        """Ingest's batch: the spans of the runs kept join them."""
        for batch in spans.to_batches():
            self.runs.hold(batch)

    def kept(self, trace_id: str) -> bool:
        """Whether the run is kept: then it holds every span acknowledged of it (a batch joins
        the kept runs before its exporter is answered), so it lacks nothing the agent sent
        before it asked."""
        return self.runs.count(trace_id) is not None

    def adopt(self, trace_id: str, rows: list[dict[str, Any]], since: int) -> bool:
        """Keep the run as `rows` (every span of it loaded, any service) with its spans
        acknowledged after the `since`-th batch: `runs.begin_read()` before a read in a guard
        thread or a gRPC listener thread (batches acknowledged while it reads), `runs.seq()` on
        the event loop when every acknowledged span of the run is loaded. False when not kept
        (batches acknowledged meanwhile let go, or more spans than a kept run holds)."""
        return self.runs.adopt(trace_id, rows, since)

    def answer(
        self,
        request: GuardRequest,
        decision_of: Callable[[Target], tuple[Decision, list[str]]],
        span_id: str,
        now_ns: int,
    ) -> GuardAnswer | None:
        """`judge_call`'s answer for the kept run under the packs in force (`in_force`) and
        the target's current decision (`decision_of`); None: left to Python. An MCP call is
        Python's: its step is judged with the server it names."""
        if request.tool.kind == "mcp":
            return None
        call = proposed_row(request, span_id, request.parent_span_id or None, now_ns)
        decision = decision_reader(decision_of)
        out = self.runs.judge(call, request.agent, request.version, decision)
        if isinstance(out, str):
            return None
        answer, reasons, evidence, messages, decided, parent = out
        return GuardAnswer(Answer(answer), reasons, evidence, messages, span_id, decided, parent)

    def record_answered(self, metrics: GuardMetrics, recorder: GuardRecorder) -> set[str]:
        """On the event loop: the calls the listeners answered since the last look, recorded
        as steps of their runs and counted, as `Guard.check` does for its own; the services
        they were about."""
        dropped = self.runs.dropped()
        if dropped:
            metrics.dropped.labels("queue_full").inc(dropped)
        services = set()
        for request, answer, start_ns, end_ns, seconds, protocol in self.recorded():
            services.add(request.service)
            metrics.called(protocol)
            metrics.had_run("listener")
            metrics.gave(answer, "judged")
            span = guard_span(request, answer, answer.parent_span_id, start_ns, end_ns)
            recorder.record(request, span)
            metrics.duration.observe(seconds)
        return services

    def recorded(self) -> list[tuple[GuardRequest, GuardAnswer, int, int, float, str]]:
        """The calls the listeners answered since the last look: each call (as far as its
        step says it), its answer, the step's start and end (ns), and its latency (s)."""
        out = []
        for (trace_id, service, version, tool, call_id), said, timing in self.runs.answered():
            answer, reasons, evidence, messages, decided, parent = said
            span_id, start_ns, end_ns, seconds, protocol = timing
            request = GuardRequest.model_construct(
                trace_id=trace_id,
                service=service,
                version=version,
                tool=ProposedCall.model_construct(name=tool, tool_call_id=call_id),
            )
            given = GuardAnswer(
                Answer(answer), reasons, evidence, messages, span_id, decided, parent
            )
            out.append((request, given, start_ns, end_ns, seconds, protocol))
        return out
