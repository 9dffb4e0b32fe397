"""Session rules over sessions made of real captured runs, on every instrumentation: an
approval's lifetime in turns, time and resource; session budgets; failures repeated across
turns. Each turn is a captured run given its own trace and span ids (and, where time matters,
moved later), as a conversation's next turn would be."""

from __future__ import annotations

from dataclasses import replace

import pytest

from evaluators.base import Decision, Verdict
from evaluators.evaluate import evaluate_pack, evaluate_session_pack
from evaluators.model import Trajectory
from evaluators.rulepack import RulePack
from evaluators.sessions import Session
from tests.unit.evaluators.test_shipped_packs import CAPTURES, trajectory

INSTRUMENTATIONS = sorted(
    {p.name.rsplit("-", 1)[0] for p in CAPTURES.glob("*-approved_write.otlp.json")}
)
MINUTE_NS = 60 * 10**9


def turn(instrumentation: str, scenario: str, n: int, later_ns: int = 0) -> Trajectory:
    """A captured run as turn `n` of a session: ids of its own, `later_ns` after the capture."""
    t = trajectory(CAPTURES / f"{instrumentation}-{scenario}.otlp.json")

    def moved(span_id: str | None) -> str | None:
        return None if span_id is None else f"{span_id[:-2]}{n:02x}"

    steps = [
        replace(
            s,
            span_id=moved(s.span_id),
            parent_span_id=moved(s.parent_span_id),
            start_time_unix_nano=s.start_time_unix_nano + later_ns,
            end_time_unix_nano=s.end_time_unix_nano + later_ns,
        )
        for s in t.steps
    ]
    return replace(
        t,
        trace_id=f"{t.trace_id[:-2]}{n:02x}",
        steps=steps,
        root_span_id=moved(t.root_span_id),
        start_time_unix_nano=t.start_time_unix_nano + later_ns,
        end_time_unix_nano=t.end_time_unix_nano + later_ns,
    )


def pack(*rules: dict[str, object]) -> RulePack:
    return RulePack.model_validate(
        {
            "name": "sessions",
            "version": "1",
            "owner": "support-oncall",
            "approvals": {"tools": ["request_approval"]},
            "rules": list(rules),
        }
    )


LIFETIME = {
    "id": "fresh-approval",
    "type": "approval_lifetime",
    "writes": {"kind": "tool", "name": "update_*"},
    "reason": "stale_approval",
    "on_fail": "QUARANTINE",
}


def only(session: Session, p: RulePack) -> tuple[Verdict, str, tuple[str, ...], tuple[str, ...]]:
    (result,) = evaluate_session_pack(session, p)
    return result.verdict, result.message, result.evidence, result.traces


@pytest.mark.parametrize("instrumentation", INSTRUMENTATIONS)
def test_a_write_turns_after_its_approval_needs_a_new_one(instrumentation: str) -> None:
    first = turn(instrumentation, "approved_write", 1)
    second = turn(instrumentation, "missing_search", 2, MINUTE_NS)  # another question
    third = turn(instrumentation, "missing_approval", 3, 2 * MINUTE_NS)  # writes, no approval
    p = pack({**LIFETIME, "max_turns": 2})
    # Turn 1 alone, and turns 1-2: every write covered.
    assert only(Session("s", [first]), p)[0] == Verdict.PASS
    assert only(Session("s", [first, second]), p)[0] == Verdict.PASS
    verdict, message, evidence, traces = only(Session("s", [first, second, third]), p)
    assert verdict == Verdict.FAIL
    assert "turn 3" in message and "2 turn(s) old" in message
    names = {s.span_id: s.name for t in (first, third) for s in t.steps}
    assert [names[e] for e in evidence] == ["request_approval", "update_account"]
    assert traces == (first.trace_id, third.trace_id)
    (result,) = evaluate_session_pack(Session("s", [first, second, third]), p)
    assert result.requested_decision == Decision.QUARANTINE
    # The run on its own passes the run rule that session rules do not replace: it is
    # `precedes` (per run) that sees the missing approval; session rules are not run per run.
    assert evaluate_pack(third, p) == []


@pytest.mark.parametrize("instrumentation", INSTRUMENTATIONS)
def test_a_renewed_approval_covers_the_later_write(instrumentation: str) -> None:
    first = turn(instrumentation, "approved_write", 1)
    third = turn(instrumentation, "approved_write", 3, 2 * MINUTE_NS)
    p = pack({**LIFETIME, "max_turns": 1, "same_resource": ["$.customer_id"]})
    verdict, message, _, _ = only(Session("s", [first, third]), p)
    assert verdict == Verdict.PASS, message


@pytest.mark.parametrize("instrumentation", INSTRUMENTATIONS)
def test_an_approval_expires_after_max_age(instrumentation: str) -> None:
    first = turn(instrumentation, "approved_write", 1)
    late = turn(instrumentation, "missing_approval", 2, 20 * MINUTE_NS)
    soon = turn(instrumentation, "missing_approval", 3, MINUTE_NS)
    p = pack({**LIFETIME, "max_age": "10m"})
    verdict, message, _, traces = only(Session("s", [first, late]), p)
    assert verdict == Verdict.FAIL and "s old (> 10m)" in message
    assert traces == (first.trace_id, late.trace_id)
    assert only(Session("s", [first, soon]), p)[0] == Verdict.PASS


def test_an_approval_covers_only_its_own_resource() -> None:
    instrumentation = INSTRUMENTATIONS[0]
    first = turn(instrumentation, "approved_write", 1)
    other = turn(instrumentation, "missing_approval", 2, MINUTE_NS)
    for s in other.steps:
        if s.name == "update_account":
            s.arguments = {**s.arguments, "customer_id": "C-2000"}
    p = pack({**LIFETIME, "same_resource": ["$.customer_id"]})
    verdict, message, _, _ = only(Session("s", [first, other]), p)
    assert verdict == Verdict.FAIL and "another resource" in message


def test_a_denied_approval_never_covers() -> None:
    instrumentation = INSTRUMENTATIONS[0]
    denied = turn(instrumentation, "denied_ignored", 1)
    p = pack({**LIFETIME, "max_turns": 5})
    verdict, message, evidence, traces = only(Session("s", [denied]), p)
    assert verdict == Verdict.FAIL and "no approval before it" in message
    assert [s.name for s in denied.steps if s.span_id in evidence] == ["update_account"]
    assert traces == (denied.trace_id,)


@pytest.mark.parametrize("instrumentation", INSTRUMENTATIONS)
def test_session_budgets_add_up_over_turns(instrumentation: str) -> None:
    turns = [turn(instrumentation, "approved_write", n, n * MINUTE_NS) for n in range(1, 4)]
    per_run = turns[0]
    budget = {"id": "session-budget", "type": "budget", "scope": "session", "reason": "budget"}
    tools = pack({**budget, "max_tool_calls": 2 * per_run.tool_calls})
    assert only(Session("s", turns[:2]), tools)[0] == Verdict.PASS
    verdict, message, _, traces = only(Session("s", turns), tools)
    assert verdict == Verdict.FAIL and "tool calls" in message
    assert traces == (turns[-1].trace_id,)
    many = pack({**budget, "max_turns": 2})
    verdict, message, _, _ = only(Session("s", turns), many)
    assert verdict == Verdict.FAIL and message == "over budget: turns 3 > 2"
    # Repeats count across turns: the same lookup in three turns.
    same = pack({**budget, "max_same_call": 2})
    verdict, message, evidence, traces = only(Session("s", turns), same)
    assert verdict == Verdict.FAIL and "lookup_customer called 3 times" in message
    named = {s.span_id: s.name for t in turns for s in t.steps}
    # every call the three turns repeat, each once per turn
    assert {named[e] for e in evidence} == {"lookup_customer", "request_approval", "update_account"}
    assert len(evidence) == 9
    assert traces == tuple(t.trace_id for t in turns)
    # A session budget is not a run budget: no run result.
    assert evaluate_pack(turns[0], many) == []


@pytest.mark.parametrize("instrumentation", INSTRUMENTATIONS)
def test_a_tool_failing_in_several_turns(instrumentation: str) -> None:
    failing = (
        [turn(instrumentation, "tool_error_retry", n, n * MINUTE_NS) for n in (1, 2, 4)]
        if (CAPTURES / f"{instrumentation}-tool_error_retry.otlp.json").exists()
        else []
    )
    if not failing:
        pytest.skip(f"{instrumentation} has no tool_error_retry capture")
    fine = turn(instrumentation, "booking_ok", 3, 3 * MINUTE_NS)
    rule = {"id": "hold-keeps-failing", "type": "repeated_failures", "reason": "repeated_failure"}
    p = pack({**rule, "min_turns": 3})
    session = Session("s", [failing[0], failing[1], fine, failing[2]])
    verdict, message, evidence, traces = only(session, p)
    assert verdict == Verdict.FAIL and message == "hold_seat failed in 3 turns (1, 2, 4)"
    named = {s.span_id: (s.name, s.status) for t in failing for s in t.steps}
    assert [named[e][1] for e in evidence] == ["error"] * 3
    assert traces == tuple(t.trace_id for t in failing)
    in_a_row = pack({**rule, "min_turns": 3, "consecutive": True})
    assert only(session, in_a_row)[0] == Verdict.PASS
    assert only(Session("s", failing[:2]), p)[0] == Verdict.PASS


def test_an_incomplete_turn_makes_a_pass_a_review() -> None:
    instrumentation = INSTRUMENTATIONS[0]
    first = replace(turn(instrumentation, "approved_write", 1), status="incomplete")
    (result,) = evaluate_session_pack(Session("s", [first]), pack({**LIFETIME, "max_turns": 1}))
    assert result.verdict == Verdict.REVIEW and result.reason == "trace_incomplete"
    assert result.traces == (first.trace_id,)


@pytest.mark.parametrize(
    ("fields", "error"),
    [
        ({"type": "approval_lifetime", "writes": {"kind": "tool"}}, "set max_age, max_turns"),
        ({"type": "budget", "max_turns": 3}, "needs `scope: session`"),
        (
            {**LIFETIME, "max_turns": 1, "when": {"input": {"regex": "x"}}},
            "a session rule sees all its turns",
        ),
    ],
)
def test_broken_session_rules_are_refused(fields: dict[str, object], error: str) -> None:
    with pytest.raises(ValueError, match=error):
        pack({"id": "r", "reason": "x", **fields})


def test_an_incomplete_turn_makes_a_missing_approval_a_review_not_a_failure() -> None:
    instrumentation = INSTRUMENTATIONS[0]
    first = turn(instrumentation, "approved_write", 1)
    # The approval's span never arrived: the write looks uncovered, but cannot be proven so.
    lost = [s for s in first.steps if s.name != "request_approval"]
    first = replace(first, steps=lost, status="incomplete", incomplete_reasons=["missing_spans"])
    (result,) = evaluate_session_pack(Session("s", [first]), pack({**LIFETIME, "max_turns": 1}))
    assert (result.verdict, result.reason) == (Verdict.REVIEW, "trace_incomplete")
