"""Which judgements a batch of stored runs needs, and the rows each judgement becomes.

Pure but for the clock: the stage hands in the runs, the judges in force, what was judged
already, and gets back calls to make and rows that need no call (sampled in, but incomplete,
unrenderable, over budget or cached).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Collection
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from collector.evaluation.results import trajectory_result_rows
from collector.judges.budget import Budget, JudgementCache
from collector.judges.cards import Trust, gated
from evaluators.base import Finding, Verdict
from evaluators.evaluate import result_of, when_applies
from evaluators.judge import Judgement, JudgeRule, judged_finding, render_prompt, sampled
from evaluators.model import Trajectory
from evaluators.registry import Rule
from evaluators.rulepack import RulePack


@dataclass(frozen=True)
class Judge:
    """One judge rule in force: its pack (and that version's hash), model and trust."""

    pack: RulePack
    sha256: str
    rule: JudgeRule
    trust: Trust

    @property
    def model(self) -> str:
        assert self.pack.judges is not None  # a pack with judge rules has them (RulePack)
        return self.rule.model or self.pack.judges.endpoint.model


@dataclass(frozen=True)
class Call:
    judge: Judge
    t: Trajectory
    prompt: str
    key: str  # sha256 of model and prompt: the cache key
    estimate: float | None = None  # USD the call may cost at most, held from its budget
    follows: bool = False  # the same prompt is asked already: wait for that answer, ask nothing


@dataclass
class Outcome:
    """How one judgement went: a judgement, or why there is none."""

    outcome: str  # ok | cached | timeout | rate_limited | provider_error | malformed | budget
    judgement: Judgement | None = None
    error: str | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    cost_usd: float | None = None
    seconds: float | None = None


@dataclass
class Plan:
    calls: list[Call] = field(default_factory=list)
    # judgements that need no call: (judge, run, outcome, finding when it is not a judgement's)
    settled: list[tuple[Call | None, Judge, Trajectory, Outcome | None, Finding | None]] = field(
        default_factory=list
    )


def cache_key(model: str, prompt: str) -> str:
    return hashlib.sha256(f"{model}\0{prompt}".encode()).hexdigest()


Estimate = Callable[["Judge", str], "float | None"]


def plan(
    runs: list[Trajectory],
    judges: list[Judge],
    done: set[tuple[str, int, str, str]],
    budgets: dict[str, Budget],
    cache: JudgementCache,
    now: float,
    estimate: Estimate | None = None,
    flying: Collection[str] = (),
) -> Plan:
    """Each run under each judge that applies, in order; budgets are taken (with each call's
    `estimate` of its cost held) as calls are planned so that a batch never spends past them.
    A prompt asked already (`flying`: in flight; or planned earlier in this batch) is not asked
    again: the call follows the first and costs nothing."""
    out = Plan()
    asked = set(flying)
    for t in runs:
        for judge in judges:
            if (t.trace_id, t.revision, judge.pack.name, judge.rule.id) in done:
                continue
            if not applies(judge.pack, judge.rule, t):
                continue
            if not sampled(t.trace_id, judge.rule.sample):
                continue  # counted when the run was looked at (stage.wanted)
            plan_one(out, judge, t, budgets[judge.pack.name], cache, now, estimate, asked)
    return out


def applies(pack: RulePack, rule: Rule, t: Trajectory) -> bool:
    """Whether a layer-3 rule takes the run: an agent run its pack selects and `when` allows."""
    if not t.agent_run:
        return False
    try:
        return pack.selector.matches(t) and when_applies(t, rule)
    except Exception:  # a condition on a root span that never came: not judged, not guessed
        return False


def plan_one(
    out: Plan,
    judge: Judge,
    t: Trajectory,
    budget: Budget,
    cache: JudgementCache,
    now: float,
    estimate: Estimate | None = None,
    asked: set[str] | None = None,
) -> None:
    if t.status == "incomplete":
        why = Finding(
            Verdict.REVIEW,
            f"trace incomplete ({', '.join(t.incomplete_reasons)}): not judged",
            reason="trace_incomplete",
        )
        out.settled.append((None, judge, t, None, why))
        return
    try:
        prompt = render_prompt(judge.rule, t)
    except Exception as exc:
        broken = Finding(
            Verdict.REVIEW, f"prompt failed: {type(exc).__name__}: {exc}", reason="evaluator_error"
        )
        out.settled.append((None, judge, t, None, broken))
        return
    call = Call(judge, t, prompt, cache_key(judge.model, prompt))
    cached = cache.get(call.key)
    if cached is not None:
        out.settled.append((call, judge, t, Outcome("cached", cached, cost_usd=0.0), None))
        return
    asked = set() if asked is None else asked
    if call.key in asked:
        out.calls.append(replace(call, follows=True))
        return
    cost = estimate(judge, prompt) if estimate is not None else None
    refused = budget.refused(now, cost)
    if refused is not None:
        out.settled.append((call, judge, t, Outcome("budget", error=refused), None))
        return
    budget.take(now, cost)
    asked.add(call.key)
    out.calls.append(replace(call, estimate=cost))


def finding_of(judge: Judge, outcome: Outcome) -> Finding:
    if outcome.judgement is not None:
        return judged_finding(judge.rule, outcome.judgement)
    reason = "judge_over_budget" if outcome.outcome == "budget" else "judge_unavailable"
    return Finding(
        Verdict.REVIEW, f"no judgement ({outcome.outcome}): {outcome.error}", reason=reason
    )


def result_rows(
    judge: Judge, t: Trajectory, finding: Finding, label: str | None, at: datetime
) -> list[dict[str, Any]]:
    """The run's `results` row for this judge, its failure gated by the judge's card."""
    result = result_of(judge.pack, None, judge.rule, gated(judge.rule, finding, judge.trust))
    if not result.evidence and result.verdict != Verdict.PASS and t.root_span_id:
        result = replace(result, evidence=(t.root_span_id,))  # the answer judged
    marked = judge.pack.review.marked(t.trace_id, judge.pack.name, [result])
    rows = trajectory_result_rows(t, marked, {judge.pack.name: judge.sha256}, at)
    for row in rows:
        row["label"] = label
    return rows


def call_row(
    call: Call | None, judge: Judge, t: Trajectory, outcome: Outcome, at: datetime
) -> dict[str, Any]:
    judgement = outcome.judgement
    return {
        "trace_id": t.trace_id,
        "revision": t.revision,
        "pack": judge.pack.name,
        "pack_version": judge.pack.version,
        "rule_id": judge.rule.id,
        "model": judge.model,
        "prompt_sha256": call.key if call is not None else None,
        "outcome": outcome.outcome,
        "input_tokens": outcome.input_tokens,
        "output_tokens": outcome.output_tokens,
        "cost_usd": outcome.cost_usd,
        "latency_seconds": outcome.seconds,
        "score": judgement.score if judgement else None,
        "label": judgement.label if judgement else None,
        "explanation": judgement.explanation if judgement else None,
        "error": outcome.error,
        "called_at": at,
    }
