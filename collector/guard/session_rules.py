"""The session rules the guard asks, pure: the conversation's earlier turns plus the run so far
(with the proposed call) as its latest turn, under a pack's session budgets and approval
lifetimes, evaluated by evaluators/sessions.py as the session stage will evaluate them.

As with run rules, a finding counts against the call only when the call is part of it: its
evidence names the call, or the session without the call passes. Without the call, a run
that is not a turn of the session yet (it has not closed) is no turn of its own: its other
steps count, the turn does not, so a call that opens a turn past `max_turns` is the call's.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta
from functools import partial

from collector.guard.conversation import Conversation
from collector.guard.per_pack import PerPack
from collector.guard.verdicts import NO_VERDICT, Verdicts, counted
from collector.sessions.held import SessionTurns
from collector.sessions.turns import on_session_clock
from evaluators.base import Finding
from evaluators.evaluate import incomplete_review, proven, session_finding, session_read
from evaluators.guard import GUARD_SESSION_RULE_TYPES, Answer, strongest_answer
from evaluators.matchers import text_matches
from evaluators.model import Trajectory
from evaluators.registry import Rule
from evaluators.rulepack import RulePack
from evaluators.sessions import ApprovalLifetimeRule, Session, granted, is_session_rule

SESSION_UNKNOWN = "guard_session_unknown"  # the run's conversation cannot be read whole
TRUNCATED = "session_truncated"  # longer than sessions.max_turns: only its latest turns read
EPOCH = datetime(1970, 1, 1)


guard_session_rules = PerPack(
    lambda pack: [
        r for r in pack.rules if is_session_rule(r) and r.type in GUARD_SESSION_RULE_TYPES
    ]
)


def asks_sessions(packs: list[RulePack], service: str) -> bool:
    """Whether a pack that may select the service's runs asks session rules: its agent and
    version are weighed with the run, so a conversation is never left unread for them."""
    return any(
        guard_session_rules(p)
        for p in packs
        if p.selector.service is None or text_matches(p.selector.service, service)
    )


def placed(held: SessionTurns, t: Trajectory, now_ns: int) -> Trajectory:
    """The run so far as the session's latest turn (it runs the call now, after every turn so
    far), on the session's clock. A run in progress is not an incomplete turn: its spans to
    come are not lost ones."""
    run = replace(t, status="ok") if t.status == "incomplete" else t
    others = [x for x in held.turns if x.trace_id != t.trace_id]
    arrived = {t.trace_id: EPOCH + timedelta(microseconds=now_ns // 1000 + 1)}
    return on_session_clock([*others, run], arrived)[-1]


def earlier_read(
    held: SessionTurns, pack: RulePack, rule: Rule, run: str
) -> tuple[list[Trajectory], Finding | None]:
    """The earlier turns as the pack reads them for the rule (those it selects, by its approval
    recogniser, focused), but the run's own when it is one; read once per session version,
    pack and rule, not at each call."""
    key = (id(pack), rule.id)
    found = held.read_by.get(key)
    if found is None or found[0] is not pack:
        read, failure = session_read(Session("", held.turns), pack)
        found = held.read_by[key] = (pack, focused(read, rule, "").turns, failure)
    return [x for x in found[1] if x.trace_id != run], found[2]


def focused(session: Session, rule: Rule, span_id: str) -> Session:
    """The session as one rule judges the call: an approval lifetime is asked whether an
    approval covers this write, not whether an earlier write was covered (the stage reports
    the first uncovered write: an old one would hide this one, or refuse a covered one)."""
    if not isinstance(rule, ApprovalLifetimeRule):
        return session
    turns = [
        replace(
            t,
            steps=[
                s
                for s in t.steps
                if s.span_id == span_id or granted(rule, s) or not rule.writes.matches(s)
            ],
        )
        for t in session.turns
    ]
    return Session(session.session_id, turns)


def without_call(session: Session, span_id: str, was_turn: bool) -> Session:
    """The session as it is before the call: the call gone, and the run's other steps counted
    in the turn before it when the run is not a turn yet."""
    *earlier, run = session.turns
    rest = replace(run, steps=[s for s in run.steps if s.span_id != span_id])
    if was_turn or not earlier:
        return Session(session.session_id, [*earlier, rest])
    last = earlier[-1]
    merged = replace(
        last,
        steps=[*last.steps, *rest.steps],
        end_time_unix_nano=max(last.end_time_unix_nano, rest.end_time_unix_nano),
    )
    return Session(session.session_id, [*earlier[:-1], merged])


def session_verdicts(
    pack: RulePack, held: SessionTurns, session_id: str, run: Trajectory, span_id: str
) -> list[Verdicts]:
    """The pack's session rules that can decide now, about the proposed call: over the earlier
    turns `held` and the run so far (which the pack selects), placed as the latest turn."""
    rules = guard_session_rules(pack)
    if not rules:
        return []
    was_turn = run.trace_id in held.traces
    now, run_failure = session_read(Session(session_id, [run]), pack)
    out = []
    for rule in rules:
        before, failure = earlier_read(held, pack, rule, run.trace_id)
        session = Session(session_id, [*before, *focused(now, rule, span_id).turns])
        judged: Finding | None = None
        finding = failure or run_failure  # no judgement of the turns: weighed as it is
        if finding is None:
            judged = session_finding(session, rule, wrapped=False)
            finding = incomplete_review(session, rule, judged)
        if held.truncated and not proven(rule.type, finding.verdict, finding.evidence):
            message = f"{rule.id}: only the latest {len(before)} earlier turns were read"
            out.append(Verdicts(pack.guard.on_unknown, TRUNCATED, message, (span_id,)))
            continue
        if finding.reason == "evaluator_error":  # the session without the call would err too
            message = f"{rule.id}: {finding.message}"
            out.append(Verdicts(Answer.REVIEW, finding.reason, message, (span_id,)))
            continue

        weigh = partial(before_call, session, rule, span_id, was_turn, judged)
        found = counted(rule, finding, span_id, weigh)
        if found is not None:
            out.append(found)
    return [v for v in out if v.answer != Answer.ALLOW]


def before_call(
    session: Session, rule: Rule, span_id: str, was_turn: bool, judged: Finding | None
) -> Finding:
    """The session before the call. With `judged` (what the turns that are there say, not yet
    a review for an incomplete turn), weighed by that: an incomplete earlier turn makes the
    session a review with the call and without it, and must not hide what the call adds."""
    before = without_call(session, span_id, was_turn)
    if judged is None:
        return session_finding(before, rule)
    alone = session_finding(before, rule, wrapped=False)
    return NO_VERDICT if alone.verdict != judged.verdict else incomplete_review(before, rule, alone)


def conversation_verdicts(
    chosen: list[RulePack],
    t: Trajectory,
    span_id: str,
    now_ns: int,
    conversation: Conversation | None,
) -> list[Verdicts]:
    """The session rules of the packs that select the run, over its conversation; nothing when
    the run names none; the packs' `guard.on_unknown` when its turns cannot be read."""
    asking = [p for p in chosen if guard_session_rules(p)]
    if conversation is None or not asking:
        return []
    if conversation.turns is None:
        answer = strongest_answer([p.guard.on_unknown for p in asking])
        message = f"conversation {conversation.session_id}: {conversation.why}"
        return [Verdicts(answer, SESSION_UNKNOWN, message, ())] if answer != Answer.ALLOW else []
    held, session_id = conversation.turns, conversation.session_id
    run = placed(held, t, now_ns)
    return [v for p in asking for v in session_verdicts(p, held, session_id, run, span_id)]
