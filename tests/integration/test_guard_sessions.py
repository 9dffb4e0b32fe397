"""The runtime guard asks session rules through the running server: earlier turns of a
conversation exported by the real OTel SDK, then, in the next turn, the guard asked over HTTP
before the write; the session rule's verdict afterwards (the agent runs the call whatever it was
told) read from the admin API."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import requests

from tests.support.conversations import Call, Service
from tests.support.guard import answer
from tests.support.server import FAST, RunningServer, serve
from tests.support.session_packs import approval_lifetime, session_budget
from tests.support.wait import wait_for

LOOKUP = Call("lookup_customer", {"customer": "C-1"}, '{"tier": "gold"}')
APPROVE = Call("request_approval", {"customer": "C-1"}, '{"approved": true}')
WRITE = {"customer": "C-1", "email": "m@x.org"}
SESSIONS = {"tick_seconds": 0.1}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    packs: dict[str, str | Path] = {
        "budget": session_budget("budget-desk"),
        "approvals": approval_lifetime("approval-desk"),
    }
    # one session's turns kept in memory: the other conversations' are read from the store
    sessions = {**SESSIONS, "guard_cached": 1}
    running = serve(
        tmp_path_factory.mktemp("guard-sessions"), packs, assembler=FAST, sessions=sessions
    )
    try:
        yield running
    finally:
        running.stop()


def session(server: RunningServer, conversation: str, service: str, turns: int) -> dict:
    """The conversation's session once it has `turns` turns."""

    def fetch() -> dict | None:
        url = f"{server.admin_url}/api/v1/sessions/{conversation}"
        reply = requests.get(url, params={"service": service}, timeout=5)
        found = reply.json() if reply.status_code == 200 else None
        return found if found and found["turns"] == turns else None

    return wait_for(fetch, timeout=15)


def earlier_turns(
    server: RunningServer, service: str, conversation: str, *turns: list[Call], ago: float = 0.0
) -> None:
    """Closed turns of the conversation (the first stamped `ago` seconds back), made into its
    session before the next one asks."""
    agent = Service(server, service, "1.0.0")
    for i, calls in enumerate(turns):
        agent.turn(conversation, calls, ago=0.0 if i else ago)
    agent.shutdown()
    session(server, conversation, service, len(turns))


@contextmanager
def turn_in_progress(
    server: RunningServer,
    service: str,
    conversation: str,
    write: bool = True,
    names: str = "gen_ai.conversation.id",
) -> Iterator[tuple[str, Callable[[], dict[str, Any]]]]:
    """The next turn, open: the model has asked for the write (its span names the
    conversation, as the instrumentations write it on every span); yields the run's trace id
    and how to ask the guard about the write. Then the agent runs the write (whatever it was
    told, so that the verdict afterwards can be held against the answer) unless `write` is
    False, and the turn ends. `names`: the attribute that names the conversation."""
    agent = Service(server, service, "1.0.0")
    tracer = agent.provider.get_tracer("agent_loop")
    attrs = {names: conversation}
    agent_span = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "support-agent"}
    with tracer.start_as_current_span(
        "invoke_agent support-agent", attributes={**attrs, **agent_span}
    ) as root:
        with tracer.start_as_current_span(
            "chat gpt-4.1-mini", attributes={**attrs, "gen_ai.operation.name": "chat"}
        ):
            pass
        agent.provider.force_flush()
        trace_id = format(root.get_span_context().trace_id, "032x")
        parent = format(root.get_span_context().span_id, "016x")
        yield (
            trace_id,
            lambda: answer(
                server, trace_id, "update_account", arguments=WRITE, parent=parent, service=service
            ),
        )
        if write:
            with tracer.start_as_current_span(
                "execute_tool update_account",
                attributes={
                    **attrs,
                    "gen_ai.operation.name": "execute_tool",
                    "gen_ai.tool.name": "update_account",
                    "gen_ai.tool.call.arguments": json.dumps(WRITE),
                    "gen_ai.tool.call.result": "ok",
                },
            ):
                pass
    agent.shutdown()


def asking_turn(
    server: RunningServer, service: str, conversation: str
) -> tuple[str, dict[str, Any]]:
    """The next turn, whose write the guard is asked about once."""
    with turn_in_progress(server, service, conversation) as (trace_id, ask):
        got = ask()
    return trace_id, got


def verdict_afterwards(
    server: RunningServer, service: str, conversation: str, turns: int, rule: str, turn: str
) -> tuple[str, str]:
    """The session rule's result that names the asking turn, once it closed."""
    session(server, conversation, service, turns)

    def found() -> dict | None:
        url = f"{server.admin_url}/api/v1/sessions/{conversation}"
        results = requests.get(url, params={"service": service}, timeout=5).json()["results"]
        return next((r for r in results if r["rule_id"] == rule and r["trace_id"] == turn), None)

    result = wait_for(found, timeout=15)
    return result["verdict"], result["reason"]


def test_a_write_past_the_conversations_tool_call_budget_is_denied(server: RunningServer) -> None:
    earlier_turns(server, "budget-desk", "conv-spent", [LOOKUP, LOOKUP], [LOOKUP, LOOKUP])
    earlier_turns(server, "budget-desk", "conv-spare", [LOOKUP], [LOOKUP])

    spent, got = asking_turn(server, "budget-desk", "conv-spent")
    assert (got["answer"], got["reasons"]) == ("deny", ["session_over_budget"]), got
    assert got["span_id"] in got["evidence"]
    assert "tool calls 5 > 4" in got["messages"][0]
    after = verdict_afterwards(server, "budget-desk", "conv-spent", 3, "session-budget", spent)
    assert after == ("fail", "session_over_budget")

    spare, got = asking_turn(server, "budget-desk", "conv-spare")
    assert (got["answer"], got["reasons"]) == ("allow", []), got
    after = verdict_afterwards(server, "budget-desk", "conv-spare", 3, "session-budget", spare)
    assert after[0] == "pass"


@pytest.mark.parametrize(
    ("conversation", "turns", "ago", "expected"),
    [
        pytest.param("conv-fresh", [[APPROVE]], 0.0, ("allow", []), id="the-turn-before"),
        pytest.param(
            "conv-two-back",
            [[APPROVE], [LOOKUP]],
            0.0,
            ("deny", ["stale_approval"]),
            id="two-turns-back",
        ),
        pytest.param(
            "conv-old", [[APPROVE]], 1200.0, ("deny", ["stale_approval"]), id="20-minutes-ago"
        ),
    ],
)
def test_an_approval_of_an_earlier_turn_covers_the_write_within_its_lifetime(
    server: RunningServer,
    conversation: str,
    turns: list[list[Call]],
    ago: float,
    expected: tuple[str, list[str]],
) -> None:
    earlier_turns(server, "approval-desk", conversation, *turns, ago=ago)

    asked, got = asking_turn(server, "approval-desk", conversation)
    assert (got["answer"], got["reasons"]) == expected, got
    verdict, reason = verdict_afterwards(
        server, "approval-desk", conversation, len(turns) + 1, "fresh-approval", asked
    )
    if expected[0] == "allow":
        assert verdict == "pass"
    else:
        assert got["span_id"] in got["evidence"]
        assert (verdict, reason) == ("fail", "stale_approval")


def test_with_sessions_off_the_conversation_is_never_judged_as_if_it_had_no_turns(
    tmp_path: Path,
) -> None:
    off = serve(
        tmp_path,
        {"budget": session_budget("budget-desk")},
        assembler=FAST,
        sessions={"enabled": False},
    )
    try:
        _, got = asking_turn(off, "budget-desk", "conv-unseen")
        assert (got["answer"], got["reasons"]) == ("review", ["guard_session_unknown"]), got
        assert "sessions.enabled: false" in got["messages"][0]
    finally:
        off.stop()


def test_a_run_of_no_conversation_is_asked_no_session_rule(server: RunningServer) -> None:
    agent = Service(server, "budget-desk", "1.0.0")
    tracer = agent.provider.get_tracer("agent_loop")
    with tracer.start_as_current_span("invoke_agent support-agent") as root:
        with tracer.start_as_current_span(
            "chat gpt-4.1-mini", attributes={"gen_ai.operation.name": "chat"}
        ):
            pass
        agent.provider.force_flush()
        trace_id = format(root.get_span_context().trace_id, "032x")
        got = answer(server, trace_id, "update_account", arguments=WRITE, service="budget-desk")
    agent.shutdown()
    assert (got["answer"], got["reasons"]) == ("allow", [])


def test_a_conversation_named_only_on_the_open_agent_span_is_told_by_the_call(
    server: RunningServer,
) -> None:
    """The agent's span carries the conversation id and has not ended when the agent asks: the
    call says which conversation the run is of, and the session's budget is asked."""
    earlier_turns(server, "budget-desk", "conv-told", [LOOKUP, LOOKUP], [LOOKUP, LOOKUP])
    agent = Service(server, "budget-desk", "1.0.0")
    tracer = agent.provider.get_tracer("agent_loop")
    named = {"gen_ai.conversation.id": "conv-told", "gen_ai.operation.name": "invoke_agent"}
    with tracer.start_as_current_span("invoke_agent support-agent", attributes=named) as root:
        with tracer.start_as_current_span(
            "chat gpt-4.1-mini", attributes={"gen_ai.operation.name": "chat"}
        ):
            pass
        agent.provider.force_flush()
        trace_id = format(root.get_span_context().trace_id, "032x")
        ask = {"arguments": WRITE, "service": "budget-desk"}
        untold = answer(server, trace_id, "update_account", **ask)
        told = answer(server, trace_id, "update_account", **ask, conversation="conv-told")
    agent.shutdown()
    assert (untold["answer"], untold["reasons"]) == ("allow", [])
    assert (told["answer"], told["reasons"]) == ("deny", ["session_over_budget"])


# What names a run's conversation: the GenAI conventions' id, or a configured attribute
# (OpenInference's session id).
NAMED_BY = [
    pytest.param(None, id="conventions"),
    pytest.param("session.id", id="configured-attribute"),
]


def budget_desk(tmp_path: Path, attribute: str | None, quiet: float) -> tuple[RunningServer, str]:
    """A server asking `budget-desk`'s session budget, closing a run `quiet` seconds after its
    last span; and the attribute that names a conversation on every span."""
    packs: dict[str, str | Path] = {"budget": session_budget("budget-desk")}
    slow = {**FAST, "quiet_period_seconds": quiet, "max_trace_age_seconds": max(30, 2 * quiet)}
    sessions = {**SESSIONS, "attribute": attribute} if attribute else SESSIONS
    server = serve(tmp_path, packs, assembler=slow, sessions=sessions)
    return server, attribute or "gen_ai.conversation.id"


def spent_turn(server: RunningServer, conversation: str, names: str) -> str:
    """A closed turn that uses the conversation's whole budget; its trace id."""
    agent = Service(server, "budget-desk", "1.0.0", names=names)
    first = agent.turn(conversation, [LOOKUP, LOOKUP, LOOKUP, LOOKUP])
    agent.shutdown()
    return first


@pytest.mark.parametrize("attribute", NAMED_BY)
def test_an_earlier_turn_not_closed_yet_is_never_judged_as_missing(
    tmp_path: Path, attribute: str | None
) -> None:
    """Its spans arrived; it closes once quiet for the quiet period, and only then is it a turn
    of the session: until then the guard says it cannot see the conversation whole."""
    server, names = budget_desk(tmp_path, attribute, quiet=3.0)
    try:
        first = spent_turn(server, "conv-quick", names)
        in_progress = turn_in_progress(server, "budget-desk", "conv-quick", False, names)
        with in_progress as (_, ask):
            early = ask()
            assert (early["answer"], early["reasons"]) == ("review", ["guard_session_unknown"])
            assert first in early["messages"][0] and "not closed" in early["messages"][0]
            session(server, "conv-quick", "budget-desk", 1)
            closed = ask()
            assert (closed["answer"], closed["reasons"]) == ("deny", ["session_over_budget"])
    finally:
        server.stop()


@pytest.mark.parametrize("attribute", NAMED_BY)
def test_a_turn_open_across_a_restart_is_never_judged_as_missing(
    tmp_path: Path, attribute: str | None
) -> None:
    """A turn whose spans were stored while it was open when the collector stopped: after the
    start the assembler reopens it, and until it closes into the session the guard says it
    cannot see the conversation whole (the spans came before the start, not through ingest)."""
    before, names = budget_desk(tmp_path, attribute, quiet=30.0)
    try:
        first = spent_turn(before, "conv-restart", names)
        wait_for(lambda: before.query("SELECT count(*) FROM spans")[0][0] == 5)
    finally:
        before.stop()
    after, _ = budget_desk(tmp_path, attribute, quiet=30.0)
    try:
        with turn_in_progress(after, "budget-desk", "conv-restart", False, names) as (_, ask):
            got = ask()
        assert (got["answer"], got["reasons"]) == ("review", ["guard_session_unknown"]), got
        assert first in got["messages"][0] and "not closed" in got["messages"][0]
    finally:
        after.stop()
