"""The runs the writer hands the session stage: which of them may be turns of a session the
guard asks about, while they wait to be made into sessions."""

from __future__ import annotations

from datetime import UTC, datetime

from prometheus_client import CollectorRegistry, Counter

from collector.assembler.records import RoundRows, step_json
from collector.sessions.handed import Handed
from tests.support.trajectories import run, tool

AT = datetime(2026, 12, 3, tzinfo=UTC)


def handed(by_attribute: bool, *conversations: str | None) -> Handed:
    """A queue holding one closed agent run per conversation id (trace ids t0, t1...)."""
    queue = Handed(100, by_attribute, Counter("d", "d", registry=CollectorRegistry()), lambda: None)
    rows = RoundRows(AT, {})
    for i, conversation in enumerate(conversations):
        t = run(tool(1, "lookup"))
        t.trace_id, t.conversation_id = f"t{i}", conversation
        rows.add(t, (AT, AT), [], step_json(t.steps))
    queue.consume(rows.tables(), AT)
    return queue


def test_a_waiting_run_is_the_sessions_when_it_names_it() -> None:
    queue = handed(False, "c-1", None)
    assert queue.waiting("c-1")
    assert not queue.waiting("c-2")


def test_with_a_configured_attribute_the_guard_tells_which_waiting_runs_may_be_turns() -> None:
    """Every agent run is handed (the id is looked up on its spans later): without word of
    which ones name the session, any may; with it, only those."""
    queue = handed(True, None, None)
    assert queue.waiting("th-1")
    assert not queue.waiting("th-1", lambda trace_ids: False)
    assert queue.waiting("th-1", lambda trace_ids: "t1" in trace_ids)
    queue.take()  # being made: still not in the session
    assert queue.waiting("th-1", lambda trace_ids: "t1" in trace_ids)
    queue.made()
    assert not queue.waiting("th-1", lambda trace_ids: True)
