"""Evaluate a trajectory under a pack: selector, `when`, incomplete runs, evaluator errors."""

from __future__ import annotations

from evaluators.base import Decision, Finding, Result, Verdict
from evaluators.matchers import MISSING
from evaluators.model import Trajectory
from evaluators.registry import RULE_TYPES
from evaluators.rulepack import RulePack


def when_applies(t: Trajectory, rule) -> bool:  # type: ignore[no-untyped-def]
    when = rule.when
    if when is None:
        return True
    if when.input is not None and not when.input.check(t.input if t.input else MISSING):
        return False
    root = t.root
    attrs = root.attributes if root is not None else {}
    return all(c.check(attrs.get(k, MISSING)) for k, c in when.attributes.items())


def evaluate_rule(t: Trajectory, rule) -> Finding:  # type: ignore[no-untyped-def]
    """One rule; an exception inside the evaluator becomes a `review`, never escapes."""
    kind = RULE_TYPES[rule.type]
    try:
        finding = kind.evaluate(t, rule)
    except Exception as exc:
        return Finding(
            Verdict.REVIEW,
            f"evaluator error: {type(exc).__name__}: {exc}",
            reason="evaluator_error",
        )
    if (
        t.status == "incomplete"
        and kind.needs_all_steps
        and finding.verdict != Verdict.NOT_APPLICABLE
    ):
        return Finding(
            Verdict.REVIEW,
            f"trace incomplete ({', '.join(t.incomplete_reasons)}); would be"
            f" {finding.verdict}: {finding.message}",
            finding.evidence,
            finding.score,
            reason="trace_incomplete",
        )
    return finding


def evaluate_pack(t: Trajectory, pack: RulePack, pack_version: str | None = None) -> list[Result]:
    """Results of every applicable rule; nothing for a pack whose selector does not match."""
    if not t.agent_run or not pack.selector.matches(t):
        return []
    results = []
    for rule in pack.rules:
        if not when_applies(t, rule):
            continue
        finding = evaluate_rule(t, rule)
        failed = finding.verdict == Verdict.FAIL
        requested = rule.on_fail if failed else None
        if finding.verdict == Verdict.REVIEW:
            requested = Decision.REVIEW
        results.append(
            Result(
                pack=pack.name,
                pack_version=pack_version or pack.version,
                rule_id=rule.id,
                rule_type=rule.type,
                verdict=finding.verdict,
                severity=rule.severity,
                reason=finding.reason
                or (rule.reason if finding.verdict in (Verdict.FAIL, Verdict.REVIEW) else ""),
                message=finding.message,
                evidence=finding.evidence,
                score=finding.score,
                requested_decision=requested,
            )
        )
    return results
