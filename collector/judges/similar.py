"""The similarity rules of a batch of stored runs: each run of a known case compared with the
case's expected answer by the packaged embedding model, in the judge stage's thread."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from collector.evaluation.results import trajectory_result_rows
from collector.judges.embedding import similarity
from collector.judges.plan import applies
from evaluators.base import Finding, Result
from evaluators.evaluate import error_finding, result_of
from evaluators.judge import sampled
from evaluators.model import Trajectory
from evaluators.rulepack import RulePack
from evaluators.similarity import (
    SimilarityRule,
    expected_answer,
    similarity_finding,
    unanswered,
)


def compared(rule: SimilarityRule, t: Trajectory, expected: str) -> Finding:
    """The rule's verdict on a run with an expected answer; an error is a review, not a pass."""
    found = unanswered(t)
    if found is not None:
        return found
    assert t.final_output is not None
    try:
        return similarity_finding(rule, t, similarity(t.final_output, expected))
    except Exception as exc:
        return error_finding(exc)


def case_results(pack: RulePack, t: Trajectory, expected: str | None) -> list[Result]:
    """The pack's similarity rules on a case of `sextant rules test`: its `expect.answer`, else
    the rule's own expected answer for the run's case id."""
    out = []
    for rule in pack.rules:
        if isinstance(rule, SimilarityRule) and applies(pack, rule, t):
            answer = expected if expected is not None else expected_answer(rule, t)
            if answer is not None:
                out.append(result_of(pack, None, rule, compared(rule, t, answer)))
    return out


def similarity_rows(
    runs: list[Trajectory],
    packs: list[tuple[RulePack, str]],
    done: set[tuple[str, int, str, str]],
    at: datetime,
) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for t in runs:
        for pack, sha256 in packs:
            for rule in pack.rules:
                if not isinstance(rule, SimilarityRule):
                    continue
                if (t.trace_id, t.revision, pack.name, rule.id) in done:
                    continue
                expected = expected_answer(rule, t)
                if expected is None or not applies(pack, rule, t):
                    continue
                if not sampled(t.trace_id, rule.sample):
                    continue
                result = result_of(pack, None, rule, compared(rule, t, expected))
                marked = pack.review.marked(t.trace_id, pack.name, [result])
                rows.extend(trajectory_result_rows(t, marked, {pack.name: sha256}, at))
    return rows
