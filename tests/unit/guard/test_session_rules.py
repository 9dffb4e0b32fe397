"""The session rules the guard asks, as a pure judgement: the conversation's earlier turns plus
the run so far with the proposed call, against the verdict the session stage gives afterwards."""

from __future__ import annotations

import json
from typing import Any

import pytest

from collector.assembler.build import build_trajectory
from collector.assembler.prices import PriceTable
from collector.config.evaluation import SessionsConfig
from collector.guard.call import GuardAnswer, GuardRequest
from collector.guard.check import judge_call
from collector.guard.conversation import (
    LOOP_TURNS,
    NOT_HELD,
    Conversation,
    Conversations,
    session_of,
)
from collector.sessions.handed import MayBe
from collector.sessions.held import HeldSessions, SessionTurns
from evaluators.base import Decision
from evaluators.evaluate import evaluate_session_pack
from evaluators.model import Trajectory
from evaluators.rulepack import RulePack, load_text
from evaluators.sessions import Session
from tests.support.session_packs import approval_lifetime, session_budget
from tests.support.span_rows import ROOT, TRACE, span_row

PRICES = PriceTable({})
CONVERSATION = "conv-7"
CALL = "f" * 16
MINUTE = 60_000_000_000
NOW = 1_800_000_000_000_000_000  # the guard's clock; turns are placed minutes before it
WRITE = {"customer": "C-1", "email": "m@x.org"}
BUDGET = session_budget("shop")
LIFETIME = approval_lifetime("shop")
APPROVED = ("request_approval", {"customer": "C-1"}, '{"approved": true}')
LOOKUP = ("lookup_customer", {"customer": "C-1"}, "gold")
Call = tuple[str, dict[str, Any], str]


def rows_of(trace: str, calls: list[Call], start: int, ended: bool) -> list[dict[str, Any]]:
    """An agent run of the conversation: its tool calls a second apart; its root span only
    once it has ended (a run in progress has not exported it)."""
    rows = [
        span_row(
            f"{i + 2:016x}",
            name,
            start + (i + 1) * 1_000_000_000,
            trace_id=trace,
            tool_arguments=json.dumps(arguments),
            tool_result=result,
            conversation_id=CONVERSATION,
        )
        for i, (name, arguments, result) in enumerate(calls)
    ]
    if ended:
        rows.append(root_row(trace, start, start + (len(calls) + 1) * 1_000_000_000))
    return rows


def root_row(trace: str, start: int, end: int) -> dict[str, Any]:
    root = {"parent_span_id": None, "step_kind": "agent", "tool_name": None}
    return span_row(
        ROOT,
        "invoke_agent shop-agent",
        start,
        trace_id=trace,
        end_time_unix_nano=end,
        agent_name="shop-agent",
        conversation_id=CONVERSATION,
        **root,
    )


def earlier(*turns: list[Call], minutes_apart: int = 2) -> list[Trajectory]:
    """Closed turns, the last `minutes_apart` minutes before now."""
    count = len(turns)
    return [
        build_trajectory(
            f"{i + 1:032x}",
            rows_of(f"{i + 1:032x}", calls, NOW - (count - i) * minutes_apart * MINUTE, True),
            PRICES,
        )
        for i, calls in enumerate(turns)
    ]


def asked(
    pack: str,
    turns: list[Trajectory] | None,
    so_far: list[Call],
    tool: str = "update_account",
    arguments: dict[str, Any] = WRITE,
    why: str = "",
) -> tuple[GuardAnswer, RulePack, list[dict[str, Any]]]:
    """The guard's answer about the call, the pack, and the run's rows so far."""
    compiled = load_text(pack, "pack").pack
    chat = {"step_kind": "llm", "tool_name": None, "tool_arguments": None}
    asking = span_row("e" * 16, "chat", NOW - 1_000_000, conversation_id=CONVERSATION, **chat)
    rows = [*rows_of(TRACE, so_far, NOW - MINUTE, False), asking]
    held = None if turns is None else SessionTurns(tuple(t.trace_id for t in turns), turns)
    conversation = Conversation(CONVERSATION, held, why)
    request = GuardRequest.model_validate(
        {"trace_id": TRACE, "service": "shop", "tool": {"name": tool, "arguments": arguments}}
    )
    got = judge_call(
        request, rows, [compiled], (Decision.PASS, []), CALL, NOW, PRICES, None, conversation
    )
    return got, compiled, rows


def afterwards(pack: RulePack, turns: list[Trajectory], rows: list[dict[str, Any]]) -> str:
    """The session rule's verdict once the call ran and the run closed as its latest turn."""
    call = span_row(CALL, "update_account", NOW, trace_id=TRACE, tool_arguments=json.dumps(WRITE))
    call["conversation_id"] = CONVERSATION
    run = build_trajectory(TRACE, [*rows, call, root_row(TRACE, NOW - MINUTE, NOW + 100)], PRICES)
    found = evaluate_session_pack(Session(CONVERSATION, [*turns, run]), pack)
    return found[0].verdict.value


def test_a_call_past_the_conversations_tool_call_budget_is_denied_naming_it() -> None:
    used_up = earlier([LOOKUP, LOOKUP], [LOOKUP, LOOKUP])
    got, pack, rows = asked(BUDGET, used_up, [])
    assert (got.answer.value, got.reasons) == ("deny", ["session_over_budget"])
    assert CALL in got.evidence and "tool calls 5 > 4" in got.messages[0]
    assert afterwards(pack, used_up, rows) == "fail"

    under = earlier([LOOKUP, LOOKUP], [LOOKUP])
    got, pack, rows = asked(BUDGET, under, [])
    assert (got.answer.value, got.reasons) == ("allow", [])
    assert afterwards(pack, under, rows) == "pass"


def test_a_conversation_over_budget_before_the_call_is_not_the_calls_doing() -> None:
    """The stage failed the turn that went over; refusing this call would not undo it."""
    got, _, _ = asked(BUDGET, earlier([LOOKUP, LOOKUP, LOOKUP], [LOOKUP, LOOKUP]), [])
    assert got.answer.value == "allow"


def test_a_run_that_is_not_a_turn_yet_counts_as_one() -> None:
    """Three turns closed, max_turns 3: a call opens the fourth; asked again about a run that
    has closed (a turn already), it is no new turn."""
    three = earlier([], [], [])
    got, _, _ = asked(BUDGET, three, [], tool="lookup_customer")
    assert (got.answer.value, got.reasons) == ("deny", ["session_over_budget"])
    assert "turns 4 > 3" in got.messages[0]
    closed = [*three[1:], build_trajectory(TRACE, rows_of(TRACE, [], NOW - MINUTE, True), PRICES)]
    got, _, _ = asked(BUDGET, closed, [], tool="lookup_customer")
    assert got.answer.value == "allow"


@pytest.mark.parametrize(
    ("turns", "so_far", "expected"),
    [
        pytest.param([], [APPROVED], "allow", id="approved-in-this-run"),
        pytest.param([[APPROVED]], [], "allow", id="approved-the-turn-before"),
        pytest.param([[APPROVED], []], [], "deny", id="approved-two-turns-back"),
        pytest.param(
            [[("request_approval", {"customer": "C-2"}, '{"approved": true}')]],
            [],
            "deny",
            id="approved-for-another-customer",
        ),
        pytest.param([[("request_approval", {"customer": "C-1"}, "no")]], [], "deny", id="denied"),
        pytest.param([], [], "deny", id="never-approved"),
    ],
)
def test_an_approval_covers_the_write_within_its_lifetime(
    turns: list[list[Call]], so_far: list[Call], expected: str
) -> None:
    before = earlier(*turns)
    got, pack, rows = asked(LIFETIME, before, so_far)
    assert got.answer.value == expected
    if expected == "deny":
        assert got.reasons == ["stale_approval"] and CALL in got.evidence
    assert afterwards(pack, before, rows) == ("fail" if expected == "deny" else "pass")


def test_an_approval_older_than_max_age_does_not_cover_the_write() -> None:
    stale = earlier([APPROVED], minutes_apart=20)
    got, pack, rows = asked(LIFETIME, stale, [])
    assert (got.answer.value, got.reasons) == ("deny", ["stale_approval"])
    assert "s old (> 10m)" in got.messages[0]
    assert afterwards(pack, stale, rows) == "fail"


def test_an_uncovered_write_of_an_earlier_turn_neither_refuses_nor_covers_this_one() -> None:
    """The stage has already failed the earlier write; this write is judged on its own."""
    written = ("update_account", WRITE, "ok")
    got, _, _ = asked(LIFETIME, earlier([written], [APPROVED]), [])
    assert got.answer.value == "allow"
    got, _, _ = asked(LIFETIME, earlier([written], []), [])
    assert (got.answer.value, got.evidence[-1]) == ("deny", CALL)


def test_a_conversation_that_cannot_be_read_is_the_packs_on_unknown() -> None:
    why = "sessions are off (sessions.enabled: false)"
    got, _, _ = asked(BUDGET, None, [LOOKUP], why=why)
    assert (got.answer.value, got.reasons) == ("review", ["guard_session_unknown"])
    assert why in got.messages[0]
    strict = BUDGET.replace("selector:", "guard: {on_unknown: deny}\nselector:")
    got, _, _ = asked(strict, None, [LOOKUP], why=why)
    assert (got.answer.value, got.reasons) == ("deny", ["guard_session_unknown"])
    # a pack without session rules does not need the conversation
    run_only = BUDGET.replace("    scope: session\n", "").replace("    max_turns: 3\n", "")
    got, _, _ = asked(run_only, None, [LOOKUP], why=why)
    assert got.answer.value == "allow"


def test_the_runs_conversation_is_read_as_the_session_stage_reads_it() -> None:
    """The configured attribute on any span (the least), else the conventions' id."""
    plain = [span_row("a" * 16, "x", 1), span_row("b" * 16, "y", 2, conversation_id="c-9")]
    assert session_of(plain, None) == session_of(plain, "app.thread") == "c-9"
    tagged = [
        *plain,
        span_row("c" * 16, "z", 3, attributes=json.dumps({"app.thread": "t-2"})),
        span_row("d" * 16, "z", 4, attributes=json.dumps({"app.thread": "t-1"})),
    ]
    assert session_of(tagged, "app.thread") == "t-1"
    assert session_of([span_row("a" * 16, "x", 1)], None) is None


def test_an_incomplete_earlier_turn_does_not_hide_what_the_call_adds() -> None:
    """A turn closed without its root is incomplete: the session is a review with the call and
    without it, yet the call still opens a turn past `max_turns` (a review, as afterwards)."""
    three = earlier([], [], [])
    first = three[0].trace_id
    broken = build_trajectory(first, rows_of(first, [LOOKUP], NOW - 6 * MINUTE, False), PRICES)
    assert broken.status == "incomplete"
    turns = [broken, *three[1:]]
    got, pack, rows = asked(BUDGET, turns, [], tool="lookup_customer")
    assert (got.answer.value, got.reasons) == ("review", ["trace_incomplete"])
    assert afterwards(pack, turns, rows) == "review"
    got, _, _ = asked(BUDGET, turns[:2], [], tool="lookup_customer")
    assert got.answer.value == "allow"  # the third turn: within max_turns, incomplete or not


class Stage:
    """The session stage as the guard reads it: turns kept, nothing waiting."""

    def __init__(self) -> None:
        self.held = HeldSessions(4)

    def waiting(self, session_id: str, may_be: MayBe | None = None) -> bool:
        return False


@pytest.mark.parametrize(("count", "on_the_loop"), [(LOOP_TURNS, True), (LOOP_TURNS + 1, False)])
def test_a_long_conversation_is_judged_off_the_event_loop(count: int, on_the_loop: bool) -> None:
    stage = Stage()
    turns = earlier(*([LOOKUP] for _ in range(count)), minutes_apart=1)
    key = (CONVERSATION, "shop")
    stage.held.put(key, SessionTurns(tuple(t.trace_id for t in turns), turns))
    conversations = Conversations(SessionsConfig(), stage, None)  # type: ignore[arg-type]
    request = GuardRequest.model_validate(
        {"trace_id": TRACE, "service": "shop", "tool": {"name": "lookup_customer"}}
    )
    rows = [span_row("e" * 16, "chat", NOW, conversation_id=CONVERSATION)]
    on_loop = conversations.of(request, rows, read=False)
    assert (on_loop is not NOT_HELD) == on_the_loop
    in_thread = conversations.of(request, rows, read=True)
    assert in_thread is not None and in_thread.turns is not None
    assert len(in_thread.turns.turns) == count
