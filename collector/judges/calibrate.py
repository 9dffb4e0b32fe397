"""`sextant judge calibrate`: a judge run over human-labelled cases, and the EvaluatorCard that
says how far it agrees with the people who labelled them.

A case is a `sextant export case` line whose `expect.rules` names the judge rule's verdict as
people gave it (`pass` or `fail`); `expect.answer`, when there, is shown to the judge as the
expected answer. Cases the judge could not judge (timeouts, malformed answers) are counted as
unjudged and left out of the rates, never counted as agreement.
"""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import Any

import aiohttp

from collector.errors import SextantError
from collector.judges.cards import meets, template_sha256, wilson_lower
from collector.judges.client import Unavailable, judge
from collector.replay.cases import expected_of, trajectory_from_json
from evaluators.base import Verdict
from evaluators.judge import JudgeRule, judged_finding, render_prompt
from evaluators.model import Trajectory
from evaluators.rulepack import RulePack


@dataclass(frozen=True)
class Labelled:
    t: Trajectory
    expected: str | None
    fails: bool  # people failed the run
    line: int


@dataclass(frozen=True)
class Card:
    pack: str
    pack_version: str
    rule_id: str
    model: str
    template_sha256: str
    cases: int
    cases_sha256: str | None
    positives: int  # runs people failed
    negatives: int  # runs people passed
    unjudged: int
    agreement: float | None
    tpr: float | None
    tnr: float | None
    tpr_lower: float | None
    tnr_lower: float | None
    calibrated_at: datetime
    source: str = "cases"  # cases | reviews
    not_applicable: int | None = None  # labels left out: people said the rule did not apply
    reused_labels: int | None = None  # labels an earlier card had used (reviews only)
    card_id: str = field(default_factory=lambda: uuid.uuid4().hex)

    def row(self) -> dict[str, Any]:
        return asdict(self)


def labelled_cases(docs: list[dict[str, Any]], pack: str, rule_id: str) -> list[Labelled]:
    """The cases, each with people's verdict on the rule; an error naming the first line that
    has none (a case without a label cannot calibrate anything)."""
    out = []
    for number, doc in enumerate(docs, start=1):
        line = doc.get("line", number)
        label = expected_of(doc, pack).get("rules", {}).get(rule_id)
        if label not in ("pass", "fail"):
            raise SextantError(
                f"case {line}: expect.rules.{rule_id} must be pass or fail (people's verdict),"
                f" got {label!r}"
            )
        expected = doc.get("expect", {}).get("answer")
        out.append(Labelled(trajectory_from_json(doc), expected, label == "fail", line))
    return out


async def judge_cases(pack: RulePack, rule: JudgeRule, cases: list[Labelled]) -> list[bool | None]:
    """Whether the judge fails each case (None: no judgement), at the pack's concurrency."""
    settings = pack.judges
    assert settings is not None
    model = rule.model or settings.endpoint.model
    limit = asyncio.Semaphore(settings.concurrency)

    async def one(session: aiohttp.ClientSession, case: Labelled) -> bool | None:
        prompt = render_prompt(rule, case.t, case.expected)
        async with limit:
            try:
                reply = await judge(session, settings.endpoint, model, prompt)
            except Unavailable:
                return None
        return judged_finding(rule, reply.judgement).verdict == Verdict.FAIL

    async with aiohttp.ClientSession() as session:
        return await asyncio.gather(*(one(session, c) for c in cases))


def card_of(
    pack: RulePack,
    rule: JudgeRule,
    cases: list[Labelled],
    flagged: list[bool | None],
    at: datetime,
    cases_sha256: str | None = None,
) -> Card:
    """The card of labelled cases the judge was run over."""
    fails = [c.fails for c in cases]
    return counted_card(pack, rule, fails, flagged, at, cases_sha256)


def counted_card(
    pack: RulePack,
    rule: JudgeRule,
    fails: list[bool],
    flagged: list[bool | None],
    at: datetime,
    cases_sha256: str | None = None,
    **more: Any,
) -> Card:
    """The card, by counting: a true positive is a run people failed (`fails`) and the judge
    failed (`flagged`; None where it gave no judgement)."""
    assert pack.judges is not None
    pairs = [(p, f) for p, f in zip(fails, flagged, strict=True) if f is not None]
    tp = sum(1 for fails, f in pairs if fails and f)
    tn = sum(1 for fails, f in pairs if not fails and not f)
    positives = sum(1 for fails, _ in pairs if fails)
    negatives = len(pairs) - positives
    return Card(
        pack=pack.name,
        pack_version=pack.version,
        rule_id=rule.id,
        model=rule.model or pack.judges.endpoint.model,
        template_sha256=template_sha256(rule),
        cases=len(fails),
        cases_sha256=cases_sha256,
        positives=positives,
        negatives=negatives,
        unjudged=len(fails) - len(pairs),
        agreement=(tp + tn) / len(pairs) if pairs else None,
        tpr=tp / positives if positives else None,
        tnr=tn / negatives if negatives else None,
        tpr_lower=wilson_lower(tp, positives),
        tnr_lower=wilson_lower(tn, negatives),
        calibrated_at=at,
        **more,
    )


def certifies(card: Card, pack: RulePack) -> bool:
    """Whether the card lets the judge ask for more than REVIEW (as cards.trust reads it)."""
    assert pack.judges is not None
    return meets(card.tpr_lower, card.tnr_lower, pack.judges)
