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
from collector.guard.call import GuardAnswer, GuardRequest
from collector.guard.check import answer_for, guard_rules, proposed_row
from collector.guard.session_rules import asks_sessions
from collector.guard.verdicts import Verdicts
from collector.normalize.native import native
from collector.targets import Target
from evaluators.base import Decision
from evaluators.guard import Answer
from evaluators.rulepack import RulePack

SERVICES_REMEMBERED = 10_000  # services whose asking of session rules is kept per snapshot


class NativeJudge:
    """The runs kept natively (at most `most`, the least recently asked let go; a run of more
    than `most_spans` spans is not kept) and the packs in their native form."""

    def __init__(self, prices: PriceTable, most: int, most_spans: int) -> None:
        self.runs = native.GuardRuns(most, most_spans, prices.in_lookup_order())
        self._texts: Sequence[PackText] | None = None
        self._in_force: tuple[list[RulePack], list[Any] | None] = ([], None)
        self._sessions: dict[str, bool] = {}

    def in_force(self, texts: Sequence[PackText]) -> tuple[list[RulePack], list[Any] | None]:
        """The packs and their native forms (None when a guard rule of one is not native),
        read once for each snapshot of the packs in force (`texts`, the same object until a
        pack changes): on every call they cost a tenth of it."""
        if texts is not self._texts:
            made = [native_pack(text) for text in texts]
            whole = all({r.id for r in guard_rules(m.pack)} <= set(m.native.rule_ids) for m in made)
            natives = [m.native for m in made] if whole else None
            self._texts, self._in_force = texts, ([m.pack for m in made], natives)
            self._sessions = {}
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

    def adopt(self, trace_id: str, rows: list[dict[str, Any]], since: int) -> None:
        """Keep the run as `rows` (every span of it loaded, any service) with its spans
        acknowledged after the `since`-th batch: `runs.begin_read()` before a read in a guard
        thread (batches acknowledged while it reads), `runs.seq()` on the event loop when
        every acknowledged span of the run is loaded."""
        self.runs.adopt(trace_id, rows, since)

    def answer(
        self,
        request: GuardRequest,
        packs: list[RulePack],
        natives: list[Any],
        decision_of: Callable[[Target], tuple[Decision, list[str]]],
        span_id: str,
        now_ns: int,
    ) -> GuardAnswer | None:
        """`judge_call`'s answer for the kept run (`packs` with their native forms
        `natives`; `decision_of` the target's current decision); None: left to Python."""
        call = proposed_row(request, span_id, request.parent_span_id or None, now_ns)
        out = self.runs.judge(call, request.agent, request.version, natives)
        if isinstance(out, str):
            return None
        selected, asked, verdicts, parent, first_agent, first_version = out
        target = Target(
            request.service,
            request.agent or first_agent or "",
            request.version or first_version or "",
        )
        chosen = [p for p, selects in zip(packs, selected, strict=True) if selects]
        found = [Verdicts(Answer(a), r, m, tuple(e)) for a, r, m, e in verdicts]
        asked = asked or not request.tool.tool_call_id
        answer = answer_for(request, chosen, asked, found, decision_of(target), span_id)
        answer.parent_span_id = parent
        return answer
