"""Runs of a conversation seen arriving and not yet turns of its session: the guard's earlier
turns it cannot read, until they are turns or the assembler must have closed them."""

from __future__ import annotations

import json
import random

import pyarrow as pa

from collector.clock import FakeClock
from collector.config.evaluation import SessionsConfig
from collector.guard.conversation import Conversations
from collector.guard.in_flight import COLUMNS, UNREAD, TurnsInFlight, distinct_runs

SCHEMA = pa.schema([(c, pa.string()) for c in COLUMNS])


def spans(*runs: tuple[str | None, str, str]) -> pa.Table:
    """One span per (conversation id, service, trace id)."""
    names = ["conversation_id", "service_name", "trace_id"]
    return pa.table({n: [r[i] for r in runs] for i, n in enumerate(names)})


def test_a_run_counts_until_it_is_a_turn_or_past_the_horizon() -> None:
    clock = FakeClock()
    flight = TurnsInFlight(False, 30.0, clock)
    flight.seen(spans(("c-1", "shop", "t1"), ("c-1", "shop", "t2"), (None, "shop", "t3")))
    flight.seen(spans(("c-1", "desk", "t4")))  # the same id, another service's session
    key = ("c-1", "shop")
    assert flight.open_turns(key, "t2", ()) == ["t1"]  # the asking run is not an earlier turn
    assert flight.open_turns(key, "t9", ("t1",)) == ["t2"]
    clock.advance(20)
    flight.seen(spans(("c-1", "shop", "t2")))  # a late span: seen again
    clock.advance(15)
    assert flight.open_turns(key, "t9", ()) == ["t2"]
    assert flight.open_turns(("c-2", "shop"), "t9", ()) == []


def test_across_services_a_conversation_is_one() -> None:
    flight = TurnsInFlight(True, 30.0, FakeClock())
    flight.seen(spans(("c-1", "shop", "t1"), ("c-1", "desk", "t2")))
    assert flight.open_turns(("c-1", "*"), "t9", ()) == ["t1", "t2"]


def test_a_conversation_never_asked_about_keeps_only_its_runs_within_the_horizon() -> None:
    clock = FakeClock()
    flight = TurnsInFlight(False, 30.0, clock)
    for i in range(1_000):
        flight.seen(spans(("c-long", "shop", f"t{i}")))
        clock.advance(60)
    assert len(flight._seen[("c-long", "shop")]) == 1


def test_a_run_stored_as_no_agent_run_stops_counting_at_once() -> None:
    """An MCP session's own spans name it as their conversation: that trace is never a turn."""
    flight = TurnsInFlight(False, 300.0, FakeClock())
    flight.seen(spans(("c-1", "shop", "mcp"), ("c-1", "shop", "agent")))
    stored = pa.table(
        {
            "trace_id": ["mcp", "agent"],
            "conversation_id": ["c-1", "c-1"],
            "service_name": ["shop", "shop"],
            "agent_run": [False, True],
        }
    )
    flight.closed({"trajectories": stored})
    assert flight.open_turns(("c-1", "shop"), "t9", ()) == ["agent"]


def tagged(*runs: tuple[str | None, dict | None, str]) -> pa.Table:
    """One span of service `shop` per (conversation id, attributes, trace id)."""
    return pa.table(
        {
            "conversation_id": pa.array([r[0] for r in runs], pa.string()),
            "service_name": ["shop"] * len(runs),
            "trace_id": [r[2] for r in runs],
            "attributes": [None if r[1] is None else json.dumps(r[1]) for r in runs],
        }
    )


def test_with_a_configured_attribute_a_run_counts_in_the_session_its_spans_name() -> None:
    """The least value of the attribute on any span, else the conventions' id, as the session
    stage reads it; a later span can move the run to another session."""
    flight = TurnsInFlight(False, 300.0, FakeClock(), "app.thread")
    flight.seen(
        tagged(
            ("c-9", None, "t1"),  # the conventions' id only, so far
            (None, {"app.thread": "th-2", "other": 1}, "t2"),
            (None, {"other": "app.thread"}, "t3"),  # the name as a value is no session
            (None, {"app.thread": 7}, "t4"),  # read as text, as the stage's SQL reads it
        )
    )
    assert flight.open_turns(("c-9", "shop"), "t9", ()) == ["t1"]
    assert flight.open_turns(("th-2", "shop"), "t9", ()) == ["t2"]
    assert flight.open_turns(("7", "shop"), "t9", ()) == ["t4"]
    flight.seen(tagged(("c-9", {"app.thread": "th-1"}, "t1"), (None, {"app.thread": "th-3"}, "t2")))
    assert flight.open_turns(("c-9", "shop"), "t9", ()) == []  # its attribute wins
    assert flight.open_turns(("th-1", "shop"), "t9", ()) == ["t1"]
    assert flight.open_turns(("th-2", "shop"), "t9", ()) == ["t2"]  # the least of th-2, th-3
    assert flight.open_turns(("th-3", "shop"), "t9", ()) == []


def test_with_a_configured_attribute_a_run_waiting_for_the_stage_may_be_a_turn() -> None:
    """A run handed to the session stage and not made yet is one of the session's only when
    its spans name it, or when it was never seen (after a restart): never silently none."""
    flight = TurnsInFlight(False, 300.0, FakeClock(), "app.thread")
    flight.seen(tagged((None, None, "plain"), (None, {"app.thread": "th-1"}, "named")))
    assert not flight.may_be_turns("th-1", ["plain"])
    assert flight.may_be_turns("th-1", ["plain", "named"])
    assert not flight.may_be_turns("th-2", ["plain", "named"])
    assert flight.may_be_turns("th-2", ["plain", "never-seen"])


def test_with_a_configured_attribute_a_run_stored_as_no_agent_run_stops_counting() -> None:
    flight = TurnsInFlight(False, 300.0, FakeClock(), "app.thread")
    flight.seen(tagged((None, {"app.thread": "th-1"}, "mcp"), (None, {"app.thread": "th-1"}, "a")))
    stored = pa.table(
        {
            "trace_id": ["mcp", "a"],
            "conversation_id": pa.array([None, None], pa.string()),
            "service_name": ["shop", "shop"],
            "agent_run": [False, True],
        }
    )
    flight.closed({"trajectories": stored})
    assert flight.open_turns(("th-1", "shop"), "t9", ()) == ["a"]


class Unreadable:
    """A store whose reads fail."""

    def cursor(self) -> None:
        raise OSError("disk gone")


def test_runs_open_before_a_start_that_could_not_be_read_leave_every_conversation_unread() -> None:
    """Ingest never told of them: until the horizon has passed, any conversation may have one
    in flight, and the guard says it cannot read the conversation rather than judge it."""
    clock = FakeClock()
    flight = TurnsInFlight(False, 30.0, clock)
    conversations = Conversations(SessionsConfig(), None, Unreadable(), flight)  # type: ignore[arg-type]
    conversations.recover()
    assert flight.open_turns(("c-1", "shop"), "t9", ()) == [UNREAD]
    clock.advance(31)
    assert flight.open_turns(("c-1", "shop"), "t9", ()) == []


def test_conversations_quiet_past_the_horizon_are_let_go_as_others_arrive() -> None:
    clock = FakeClock()
    flight = TurnsInFlight(False, 30.0, clock)
    for i in range(100):
        flight.seen(spans((f"c-{i}", "shop", f"t{i}")))
    flight.closed(
        {
            "trajectories": pa.table(
                {
                    "trace_id": ["t0"],
                    "conversation_id": ["c-0"],
                    "service_name": ["shop"],
                    "agent_run": [False],
                }
            )
        }
    )  # its only run gone: nothing left of the conversation
    clock.advance(20)
    flight.seen(spans(("c-new", "shop", "t-new")))
    assert len(flight._seen) == 100 and ("c-0", "shop") not in flight._seen
    clock.advance(20)  # the first hundred are 40 s quiet, past the 30 s horizon
    flight.seen(spans(("c-newer", "shop", "t-newer")))
    assert list(flight._seen) == [("c-new", "shop"), ("c-newer", "shop")]


def reference_runs(table: pa.Table) -> list[tuple[str, str | None, str]]:
    """What `distinct_runs` means, in Python: each (conversation, service, trace) once, in the
    order first seen, the spans without a conversation or a trace id left out."""
    rows = zip(*(table[c].to_pylist() for c in COLUMNS), strict=True)
    return list(dict.fromkeys(r for r in rows if r[0] is not None and r[2] is not None))


def test_the_native_distinct_runs_are_the_python_ones() -> None:
    rng = random.Random(11)
    cells = [None, "", "c-1", "c-2", "ç-ü", "c-1\x00x", "🙂", "c" * 300]
    for _ in range(300):
        size = rng.randrange(0, 60)
        columns = [[rng.choice(cells) for _ in range(size)] for _ in COLUMNS]
        table = pa.table(dict(zip(COLUMNS, columns, strict=True)), schema=SCHEMA)
        chunked = pa.concat_tables([table.slice(0, size // 2), table.slice(size // 2)])
        for given in (table, chunked):
            assert list(distinct_runs(given)) == reference_runs(given)
