"""What one rule says about the proposed call, and when a rule's finding is the call's doing."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from evaluators.base import Finding, Verdict
from evaluators.guard import Answer
from evaluators.registry import Rule

# What a step has to say when it is not there: a finding with it is the call's whatever it is.
NO_VERDICT = Finding(Verdict.NOT_APPLICABLE, "")


@dataclass(frozen=True)
class Verdicts:
    """What one rule said about the proposed call."""

    answer: Answer
    reason: str
    message: str
    evidence: tuple[str, ...]


def counted(
    rule: Rule, finding: Finding, span_id: str, without: Callable[[], Finding]
) -> Verdicts | None:
    """deny / review when the finding is about the proposed call: its evidence names the call,
    or `without` it (the run, or the session, as it is before the call) the verdict is not the
    same (a total over budget names no step). None when the finding is not the call's."""
    if finding.verdict not in (Verdict.FAIL, Verdict.REVIEW):
        return None
    if span_id not in finding.evidence and without().verdict == finding.verdict:
        return None
    answer = Answer.DENY if finding.verdict == Verdict.FAIL else Answer.REVIEW
    reason = finding.reason or (rule.reason if finding.verdict == Verdict.FAIL else "review")
    evidence = tuple(dict.fromkeys((*finding.evidence, span_id)))
    return Verdicts(answer, reason, f"{rule.id}: {finding.message}", evidence)


def error_verdict(rule: Rule, exc: Exception, span_id: str) -> Verdicts:
    """An evaluator that raised: the call is reviewed, never allowed on a rule not asked."""
    message = f"{rule.id}: evaluator error: {type(exc).__name__}: {exc}"
    return Verdicts(Answer.REVIEW, "evaluator_error", message, (span_id,))
