"""Runs of a conversation seen arriving that are not turns of its session yet: a turn still
open (quiet for less than the assembler's quiet period) or on its way to the session stage is
an earlier turn the guard cannot read, not a turn that never was.

Ingest tells the guard of every acknowledged span batch (on the event loop): the runs that
name a conversation are noted with when they were last seen. A run stops counting once it is
a turn of the session the guard reads, or `horizon` seconds after its last span (by then the
assembler has closed it: one that is still no turn is no agent run, or of another session).
"""

from __future__ import annotations

import threading
from collections import OrderedDict

import pyarrow as pa
import pyarrow.compute as pc

from collector.clock import Clock
from collector.sessions.held import Key
from collector.sessions.loaded import ACROSS

REMEMBERED = 100_000  # conversations whose runs are noted, the least recently seen let go
COLUMNS = ["conversation_id", "service_name", "trace_id"]


class TurnsInFlight:
    def __init__(self, across_services: bool, horizon: float, clock: Clock) -> None:
        self.across_services = across_services
        self.horizon = horizon
        self.clock = clock
        self._seen: OrderedDict[Key, dict[str, float]] = OrderedDict()
        self._lock = threading.Lock()  # noted on the event loop, read in guard threads too

    def seen(self, spans: pa.Table) -> None:
        """Note the runs of these acknowledged spans that name a conversation."""
        ids = spans["conversation_id"]
        if ids.null_count == len(ids):
            return
        named = spans.filter(pc.is_valid(ids)).select(COLUMNS)
        runs = dict.fromkeys(zip(*(named[c].to_pylist() for c in COLUMNS), strict=True))
        now = self.clock.monotonic()
        oldest = now - self.horizon
        with self._lock:
            for conversation, service, trace_id in runs:
                key = (conversation, ACROSS if self.across_services else service or "")
                known = self._seen.setdefault(key, {})
                known.pop(trace_id, None)
                known[trace_id] = now  # in the order last seen: the stale ones first
                while (first := next(iter(known))) != trace_id and known[first] < oldest:
                    del known[first]
                self._seen.move_to_end(key)
            while len(self._seen) > REMEMBERED:
                self._seen.popitem(last=False)

    def closed(self, tables: dict[str, pa.Table], received_at: object = None) -> None:
        """Commit hook: runs stored closed that are no agent run (an MCP session's own spans
        name it as their conversation) will never be turns: they stop counting at once rather
        than at the horizon."""
        runs = tables.get("trajectories")
        if runs is None or not runs.num_rows:
            return
        ids = runs["conversation_id"]
        if ids.null_count == len(ids):
            return
        no_turn = pc.and_(pc.is_valid(ids), pc.invert(pc.fill_null(runs["agent_run"], True)))
        gone = runs.filter(no_turn).select(COLUMNS)
        if not gone.num_rows:
            return
        with self._lock:
            for conversation, service, trace_id in zip(
                *(gone[c].to_pylist() for c in COLUMNS), strict=True
            ):
                key = (conversation, ACROSS if self.across_services else service or "")
                known = self._seen.get(key)
                if known is not None:
                    known.pop(trace_id, None)

    def open_turns(self, key: Key, trace_id: str, turns: tuple[str, ...]) -> list[str]:
        """The conversation's runs other than `trace_id` seen within the horizon that are not
        among its session's `turns`."""
        oldest = self.clock.monotonic() - self.horizon
        with self._lock:
            runs = self._seen.get(key)
            if runs is None:
                return []
            for gone in [t for t, at in runs.items() if at < oldest]:
                del runs[gone]
            return [t for t in runs if t != trace_id and t not in turns]
