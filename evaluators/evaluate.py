"""Evaluate a trajectory under a pack: selector, `when`, incomplete runs, evaluator errors."""

from __future__ import annotations

from dataclasses import replace

from evaluators.approvals import DEFAULT_APPROVALS, with_approvals
from evaluators.base import Decision, Finding, Result, Verdict
from evaluators.matchers import MISSING
from evaluators.model import Trajectory
from evaluators.registry import RULE_TYPES, Rule
from evaluators.rulepack import RulePack
from evaluators.sessions import Session, is_session_rule

BUILD_ERROR = "build_error"  # the incomplete reason of a trace whose spans could not be built


def when_applies(t: Trajectory, rule: Rule) -> bool:
    when = rule.when
    if when is None:
        return True
    if when.input is not None and not when.input.check(t.input if t.input else MISSING):
        return False
    attrs = t.root.attributes if t.root is not None else {}
    return all(c.check(attrs.get(k, MISSING)) for k, c in when.attributes.items())


def root_conditions(pack: RulePack, rule: Rule) -> bool:
    return bool(pack.selector.attributes or (rule.when is not None and rule.when.attributes))


def evaluate_rule(t: Trajectory, rule: Rule) -> Finding:
    """One rule; an exception inside the evaluator becomes a `review`, never escapes."""
    kind = RULE_TYPES[rule.type]
    if kind.evaluate is None:
        raise ValueError(f"{rule.type} rules are evaluated over windows, not single runs")
    if BUILD_ERROR in (t.incomplete_reasons or ()):  # None in a trajectory read from JSON
        # The spans could not be read into steps: there is nothing to judge, only to look at.
        return Finding(
            Verdict.REVIEW, "the trace could not be built into steps", reason=BUILD_ERROR
        )
    try:
        finding = kind.evaluate(t, rule)
    except Exception as exc:
        return error_finding(exc)
    if t.status != "incomplete" or finding.verdict == Verdict.REVIEW:
        return finding
    if proven(rule.type, finding.verdict, finding.evidence):
        return finding
    return Finding(
        Verdict.REVIEW,
        f"trace incomplete ({', '.join(t.incomplete_reasons)}); would be"
        f" {finding.verdict}: {finding.message}",
        finding.evidence,
        finding.score,
        reason="trace_incomplete",
    )


def proven(rule_type: str, verdict: Verdict, evidence: tuple[str, ...]) -> bool:
    """A failure shown by steps that are there, which missing steps (an incomplete run, turns
    not read) cannot undo; any other verdict they could change."""
    return verdict == Verdict.FAIL and bool(evidence) and not RULE_TYPES[rule_type].needs_all_steps


def error_finding(exc: Exception) -> Finding:
    return Finding(
        Verdict.REVIEW, f"evaluator error: {type(exc).__name__}: {exc}", reason="evaluator_error"
    )


def selected(pack: RulePack, t: Trajectory) -> tuple[bool, Exception | None]:
    """Whether the pack's selector takes the run; (True, the error) when it cannot tell, so
    that its rules are reviewed rather than skipped."""
    try:
        if t.root is None and pack.selector.attributes:
            raise LookupError("the selector needs the root span, which never arrived")
        return pack.selector.matches(t), None
    except Exception as exc:
        return True, exc


def evaluate_pack(t: Trajectory, pack: RulePack, pack_version: str | None = None) -> list[Result]:
    """Results of every applicable rule; nothing for a pack whose selector does not match.

    A selector or `when` that cannot be checked (a condition that raises, root-span conditions
    on a run whose root never arrived) gives `review` results, never silence.
    """
    if not t.agent_run:
        return []
    findings: list[tuple[Rule, Finding]] = []
    selects, selector_error = selected(pack, t)
    if not selects:
        return []
    t = with_approvals(t, pack.approvals or DEFAULT_APPROVALS)
    for rule in pack.rules:
        if RULE_TYPES[rule.type].evaluate is None or is_session_rule(rule):
            continue  # evaluated apart from the run's round (windows, judges, sessions)
        if selector_error is not None:
            findings.append((rule, review_for(selector_error)))
            continue
        try:
            if root_conditions(pack, rule) and t.root is None:  # `root` is a search
                raise LookupError("`when` needs the root span, which never arrived")
            applies = when_applies(t, rule)
        except Exception as exc:
            findings.append((rule, review_for(exc)))
            continue
        if applies:
            findings.append((rule, evaluate_rule(t, rule)))
    results = [result_of(pack, pack_version, rule, finding) for rule, finding in findings]
    return pack.review.marked(t.trace_id, pack.name, results)


def review_for(exc: Exception) -> Finding:
    if isinstance(exc, LookupError):
        return Finding(Verdict.REVIEW, str(exc), reason="trace_incomplete")
    return error_finding(exc)


def result_of(pack: RulePack, version: str | None, rule: Rule, finding: Finding) -> Result:
    failed = finding.verdict == Verdict.FAIL
    requested = rule.on_fail if failed else None
    if finding.verdict == Verdict.REVIEW:
        requested = Decision.REVIEW
    decided = finding.verdict in (Verdict.FAIL, Verdict.REVIEW)
    return Result(
        pack=pack.name,
        pack_version=version or pack.version,
        rule_id=rule.id,
        rule_type=rule.type,
        verdict=finding.verdict,
        severity=rule.severity,
        reason=finding.reason or (rule.reason if decided else ""),
        message=finding.message,
        evidence=finding.evidence,
        score=finding.score,
        requested_decision=requested,
        traces=finding.traces,
    )


def evaluate_session_pack(
    session: Session, pack: RulePack, pack_version: str | None = None
) -> list[Result]:
    """Results of the pack's session rules over the turns whose target the pack selects (a
    turn is judged only by the packs that select it, and is evidence only for them); nothing
    when it selects none. A result that names no turn is about the latest turn it read."""
    rules = [r for r in pack.rules if is_session_rule(r)]
    if not rules:
        return []
    read, failure = session_read(session, pack)
    if not read.turns:
        return []
    results = []
    for rule in rules:
        finding = failure or session_finding(read, rule)
        if not finding.traces:
            finding = replace(finding, traces=(read.turns[-1].trace_id,))
        results.append(result_of(pack, pack_version, rule, finding))
    return results


def session_read(session: Session, pack: RulePack) -> tuple[Session, Finding | None]:
    """The session as the pack reads it: the turns it selects, each read by its approval
    recogniser; and the review every rule gets when it cannot tell whether it selects one."""
    taken: list[Trajectory] = []
    failure = None
    for t in session.turns:
        selects, selector_error = selected(pack, t) if t.agent_run else (False, None)
        if selects:
            taken.append(t)
            if selector_error is not None and failure is None:
                failure = replace(review_for(selector_error), traces=(t.trace_id,))
    approvals = pack.approvals or DEFAULT_APPROVALS
    return Session(session.session_id, [with_approvals(t, approvals) for t in taken]), failure


def session_finding(session: Session, rule: Rule, wrapped: bool = True) -> Finding:
    """One session rule; like a run's rule, an error is a review and (unless not `wrapped`:
    the verdict the turns that are there give) a verdict that missing steps could change is a
    review while a turn is incomplete."""
    kind = RULE_TYPES[rule.type]
    assert kind.session is not None  # is_session_rule holds only for such types
    broken = [t.trace_id for t in session.turns if BUILD_ERROR in (t.incomplete_reasons or ())]
    if broken:
        return Finding(
            Verdict.REVIEW,
            f"turn(s) could not be built into steps: {', '.join(broken)}",
            reason=BUILD_ERROR,
            traces=tuple(broken),
        )
    try:
        finding = kind.session(session, rule)
    except Exception as exc:
        return error_finding(exc)
    return incomplete_review(session, rule, finding) if wrapped else finding


def incomplete_review(session: Session, rule: Rule, finding: Finding) -> Finding:
    """The finding, or a review when a turn is incomplete and its missing steps could change it."""
    incomplete = [t for t in session.turns if t.status == "incomplete"]
    if not incomplete or finding.verdict == Verdict.REVIEW:
        return finding
    if proven(rule.type, finding.verdict, finding.evidence):
        return finding
    return Finding(
        Verdict.REVIEW,
        f"{len(incomplete)} turn(s) incomplete; would be {finding.verdict}: {finding.message}",
        finding.evidence,
        finding.score,
        reason="trace_incomplete",
        traces=tuple(t.trace_id for t in incomplete),
    )
