"""The conversation a guarded run belongs to: the session its spans name, and that session's
earlier turns as the session stage made them, for the session rules the guard asks.

The turns come from memory when the stage made the session lately (it keeps each session's
turns as it loads them to run its rules); else they are read from the store once, in a guard
thread, and kept until the stage makes the session again. A conversation whose turns cannot
be read whole (the stage is off, or a closed turn is still on its way into the session) is
said so, never judged as if it had no earlier turn.
"""

from __future__ import annotations

import functools
import logging
from dataclasses import dataclass
from typing import Any, Protocol

import pyarrow as pa

from collector.config.evaluation import SessionsConfig
from collector.guard.call import GuardRequest
from collector.guard.in_flight import TurnsInFlight, attribute_value
from collector.sessions.handed import MayBe
from collector.sessions.held import HeldSessions, SessionTurns
from collector.sessions.loaded import ACROSS, read_turns
from collector.store.database import Database
from collector.store.reader import Reader

log = logging.getLogger(__name__)


class SessionSource(Protocol):
    """The session stage as the guard reads it."""

    held: HeldSessions

    def waiting(self, session_id: str, may_be: MayBe | None = None) -> bool: ...


@dataclass(frozen=True)
class Conversation:
    """A run's session and its turns so far; `turns` None when they cannot be read (`why`)."""

    session_id: str
    turns: SessionTurns | None = None
    why: str = ""


# The turns are neither in memory nor allowed to be read from the store (on the event loop).
NOT_HELD = Conversation("", None, "not held in memory")
# Turns past this many are judged in a guard thread, not on the event loop: the session rules
# cost about 0.5 ms at 100 turns of 10 steps and 12-32 ms at 500 when the call goes over a
# budget, time every other call on the loop would wait.
LOOP_TURNS = 50


class Conversations:
    def __init__(
        self,
        config: SessionsConfig,
        stage: SessionSource,
        database: Database,
        in_flight: TurnsInFlight | None = None,
    ) -> None:
        self.config = config
        self.stage = stage
        self.database = database
        self.in_flight = in_flight  # runs of conversations not closed into their sessions yet

    def seen(self, spans: pa.Table) -> None:
        """Ingest's hook: these spans are acknowledged."""
        if self.in_flight is not None and self.config.enabled:
            self.in_flight.seen(spans)

    def recover(self) -> None:
        """At a start: the runs open before the stop, recovered from the store or the journal,
        are in flight (ingest never told of them)."""
        if self.in_flight is None or not self.config.enabled:
            return
        try:
            with Reader(self.database).cursor() as cursor:
                spans = self.in_flight.recover(cursor)
        except Exception as exc:  # the start goes on; every conversation is unread meanwhile
            self.in_flight.blind()
            log.warning("runs open before the stop not read (conversations unread): %s", exc)
            return
        log.info("runs of conversations in flight after the start: %d spans read", spans)

    def of(
        self, request: GuardRequest, rows: list[dict[str, Any]], read: bool
    ) -> Conversation | None:
        """The run's conversation; None when its spans name none (session rules do not apply);
        NOT_HELD when `read` is False and its turns are not in memory, or are more than the
        event loop should judge (LOOP_TURNS)."""
        session_id = session_of(rows, self.config.attribute) or request.conversation_id
        if session_id is None:
            return None
        if not self.config.enabled:
            return Conversation(session_id, None, "sessions are off (sessions.enabled: false)")
        in_flight = self.in_flight
        may_be = None
        if in_flight is not None and self.config.attribute:
            may_be = functools.partial(in_flight.may_be_turns, session_id)
        if self.stage.waiting(session_id, may_be):
            why = "a closed turn of the conversation is not in its session yet"
            return Conversation(session_id, None, why)
        key = (session_id, ACROSS if self.config.across_services else request.service)
        turns = self.stage.held.get(key)
        if not read and (turns is None or len(turns.turns) > LOOP_TURNS):
            return NOT_HELD
        if turns is None:
            try:
                with Reader(self.database).cursor() as cursor:
                    turns = read_turns(cursor, key, self.config.max_turns)
            except Exception as exc:
                return Conversation(session_id, None, f"its turns could not be read: {exc}")
            self.stage.held.offer(key, turns)
        if in_flight is not None:
            open_turns = in_flight.open_turns(key, request.trace_id, turns.traces)
            if open_turns:
                why = f"run {open_turns[0]} of the conversation has not closed into its session yet"
                return Conversation(session_id, None, why)
        return Conversation(session_id, turns)


def session_of(rows: list[dict[str, Any]], attribute: str | None) -> str | None:
    """The run's session id as the stage reads it: the configured attribute on any of its
    spans (the least, as the stage takes it), else the conventions' conversation id."""
    if attribute:
        found = [
            value
            for r in rows
            if (value := attribute_value(r["attributes"], attribute)) is not None
        ]
        if found:
            return min(found)
    return next((r["conversation_id"] for r in rows if r["conversation_id"]), None)
