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
from collector.guard.verdicts import Verdicts
from collector.normalize.native import native
from collector.targets import Target
from evaluators.base import Decision
from evaluators.guard import Answer
from evaluators.rulepack import RulePack


class NativeJudge:
    """The runs kept natively (at most `most`, the least recently asked let go) and the packs
    in their native form."""

    def __init__(self, prices: PriceTable, most: int) -> None:
        self.runs = native.GuardRuns(most, prices.in_lookup_order())
        self._usable: dict[str, Any] = {}  # pack sha -> its native form, None: not usable

    def natives(self, texts: Sequence[PackText]) -> list[Any] | None:
        """The packs' native forms, when every guard rule of each is native; else None."""
        found = []
        for text in texts:
            key = text.sha256 + "|" + ",".join(sorted(text.disabled_rules))
            if key not in self._usable:
                made = native_pack(text)
                ids = set(made.native.rule_ids)
                whole = all(r.id in ids for r in guard_rules(made.pack))
                self._usable[key] = made.native if whole else None
            usable = self._usable[key]
            if usable is None:
                return None
            found.append(usable)
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
        acknowledged after the `since`-th batch (`self.runs.seq()` noted before the rows were
        read: acknowledged, not yet loaded then)."""
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
