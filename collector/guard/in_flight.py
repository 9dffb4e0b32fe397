"""Runs of a conversation seen arriving that are not turns of its session yet: a turn still
open (quiet for less than the assembler's quiet period) or on its way to the session stage is
an earlier turn the guard cannot read, not a turn that never was.

Ingest tells the guard of every acknowledged span batch (on the event loop): the runs that
name a conversation are noted with when they were last seen. A run stops counting once it is
a turn of the session the guard reads, or `horizon` seconds after its last span (by then the
assembler has closed it: one that is still no turn is no agent run, or of another session).

With the session id in a configured span attribute, a run's session is the least value of it
on any of its spans, else the conventions' conversation id (as the session stage reads it), and
spans arriving later can change it; so every run seen is remembered with the ids its spans
named so far, which also tells which of the runs waiting for the session stage may be turns of
a session (`may_be_turns`): one never seen, or forgotten, may be.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterable, Iterator
from datetime import timedelta
from typing import Any

import orjson
import pyarrow as pa
import pyarrow.compute as pc

from collector.clock import Clock
from collector.normalize.native import native
from collector.sessions.held import Key
from collector.sessions.loaded import ACROSS

# The spans of the last `horizon` seconds that no stored run covers: at a start, the runs open
# before the stop (recovered by the assembler, or replayed from the journal) are in flight.
UNCLOSED_RUNS = """
SELECT s.conversation_id, s.service_name, s.trace_id,
       CASE WHEN contains(s.attributes::VARCHAR, $key) THEN s.attributes::VARCHAR END
FROM spans s
LEFT JOIN (
  SELECT trace_id, max(last_received_at) AS covered FROM trajectories
  WHERE last_received_at >= $since GROUP BY 1
) t USING (trace_id)
WHERE s.received_at >= $since AND (t.covered IS NULL OR s.received_at > t.covered)
  AND ($key IS NOT NULL OR s.conversation_id IS NOT NULL)
"""
# What stands for the runs open before a start when they could not be read.
UNREAD = "unknown (the runs open before the start could not be read)"
REMEMBERED = 100_000  # conversations whose runs are noted, the least recently seen let go
REMEMBERED_RUNS = 100_000  # runs whose named ids are kept (a configured attribute)
COLUMNS = ["conversation_id", "service_name", "trace_id"]
Run = tuple[str, str | None, str]  # (conversation id, service, trace id)
NAMED_COLUMNS = ["attributes", "service_name", "trace_id"]


def distinct_runs(spans: pa.Table) -> dict[Run, None]:
    """(conversation id, service, trace id) of the spans that name a conversation, each once,
    in the order first seen. Natively: this runs on the event loop for every batch acknowledged,
    and making a Python string of every cell cost it about a tenth of its time under 10-span
    requests, to keep a few dozen rows of hundreds."""
    first, second, third = COLUMNS
    runs: dict[Run, None] = {}
    for batch in spans.select(COLUMNS).to_batches():
        runs.update(dict.fromkeys(native.distinct_rows(batch, (first, second, third))))
    return runs


class Named:
    """The session ids a run's spans named so far: the least value of the configured attribute
    (the one the session stage takes), the conventions' conversation ids. Small: one is kept
    for each of the last 100,000 runs."""

    __slots__ = ("attribute", "conventions")

    def __init__(self) -> None:
        self.attribute: str | None = None
        self.conventions: tuple[str, ...] = ()

    def sessions(self) -> tuple[str, ...]:
        """The sessions the run may be a turn of, as its spans stand."""
        return (self.attribute,) if self.attribute is not None else self.conventions

    def ids(self) -> tuple[str, ...]:
        return (*self.conventions, *(() if self.attribute is None else (self.attribute,)))


def attribute_value(attributes: str | None, attribute: str) -> str | None:
    """The configured attribute's value on a span (its attributes' JSON text), as text."""
    if not attributes or attribute not in attributes:
        return None
    value = orjson.loads(attributes).get(attribute)
    return None if value is None else str(value)


class TurnsInFlight:
    def __init__(
        self, across_services: bool, horizon: float, clock: Clock, attribute: str | None = None
    ) -> None:
        self.across_services = across_services
        self.horizon = horizon
        self.clock = clock
        self.attribute = attribute
        # the attribute's name as the attributes' JSON writes it (matched in the spans' text)
        self._quoted = orjson.dumps(attribute).decode() if attribute else None
        self._seen: OrderedDict[Key, dict[str, float]] = OrderedDict()
        self._named: OrderedDict[str, Named] = OrderedDict()  # with a configured attribute
        self._lock = threading.Lock()  # noted on the event loop, read in guard threads too
        self._blind_until = float("-inf")  # monotonic: runs before it may have gone unseen

    def _key(self, session: str, service: str | None) -> Key:
        return (session, ACROSS if self.across_services else service or "")

    def seen(self, spans: pa.Table) -> None:
        """Note the runs of these acknowledged spans that name a conversation."""
        runs: dict[Run, None]
        if self.attribute:
            runs = self._named_runs(spans)
        else:
            ids = spans["conversation_id"]
            if ids.null_count == len(ids):
                return
            runs = distinct_runs(spans)
        now = self.clock.monotonic()
        oldest = now - self.horizon
        with self._lock:
            for session, service, trace_id in runs:
                key = self._key(session, service)
                known = self._seen.setdefault(key, {})
                known.pop(trace_id, None)
                known[trace_id] = now  # in the order last seen: the stale ones first
                while (first := next(iter(known))) != trace_id and known[first] < oldest:
                    del known[first]
                self._seen.move_to_end(key)
            # in the order last seen: conversations quiet past the horizon first, let go
            seen = self._seen
            while seen and (len(seen) > REMEMBERED or _last(next(iter(seen.values()))) < oldest):
                seen.popitem(last=False)

    def recover(self, cursor: Any) -> int:
        """At a start: note the runs whose spans arrived within the horizon and are in no
        stored run yet; how many spans named them."""
        since = self.clock.now() - timedelta(seconds=self.horizon)
        params = {"key": self._quoted, "since": since}
        spans = cursor.sql(UNCLOSED_RUNS, params=params).to_arrow_table()
        spans = spans.rename_columns([*COLUMNS, "attributes"])
        self.seen(spans)
        return spans.num_rows

    def blind(self) -> None:
        """The runs open before the start could not be read: any conversation may have one in
        flight until the horizon has passed."""
        self._blind_until = self.clock.monotonic() + self.horizon

    def _named_runs(self, spans: pa.Table) -> dict[Run, None]:
        """Every run of the batch remembered with the ids its spans name; those that name one,
        as (session id, service, trace id), each once."""
        attribute, quoted = self.attribute, self._quoted
        assert attribute is not None and quoted is not None
        matched = pc.fill_null(pc.match_substring(spans["attributes"], quoted), False)
        tagged = [
            (value, service, trace_id)
            for text, service, trace_id in columns(
                spans.select(NAMED_COLUMNS).filter(matched), NAMED_COLUMNS
            )
            if (value := attribute_value(text, attribute)) is not None
        ]
        named = pc.is_valid(spans["conversation_id"])
        conventions = list(columns(spans.select(COLUMNS).filter(named), COLUMNS))
        with self._lock:
            for trace_id in pc.unique(spans["trace_id"]).to_pylist():
                self._named.setdefault(trace_id, Named())
                self._named.move_to_end(trace_id)
            for value, _, trace_id in tagged:
                named = self._named[trace_id]
                if named.attribute is None or value < named.attribute:
                    named.attribute = value
            for value, _, trace_id in conventions:
                named = self._named[trace_id]
                if value not in named.conventions:
                    named.conventions += (value,)
            while len(self._named) > REMEMBERED_RUNS:
                self._named.popitem(last=False)
        return dict.fromkeys([*tagged, *conventions])

    def may_be_turns(self, session_id: str, trace_ids: Iterable[str]) -> bool:
        """Whether one of these runs may be a turn of the session (a configured attribute): it
        was never seen, or was forgotten, or its spans name the session."""
        with self._lock:
            return any(self._may_be(session_id, t) for t in trace_ids)

    def _may_be(self, session_id: str, trace_id: str) -> bool:
        """(The lock held.)"""
        named = self._named.get(trace_id)
        return named is None or session_id in named.sessions()

    def closed(self, tables: dict[str, pa.Table], received_at: object = None) -> None:
        """Commit hook: runs stored closed that are no agent run (an MCP session's own spans
        name it as their conversation) will never be turns: they stop counting at once rather
        than at the horizon."""
        runs = tables.get("trajectories")
        if runs is None or not runs.num_rows:
            return
        if not self.attribute and runs["conversation_id"].null_count == runs.num_rows:
            return
        gone = runs.filter(pc.invert(pc.fill_null(runs["agent_run"], True)))
        if not gone.num_rows:
            return
        with self._lock:
            for conversation, service, trace_id in columns(gone, COLUMNS):
                for session in self._sessions_of(trace_id, conversation):
                    known = self._seen.get(self._key(session, service))
                    if known is not None:
                        known.pop(trace_id, None)

    def _sessions_of(self, trace_id: str, conversation: str | None) -> Iterable[str]:
        named = self._named.get(trace_id)
        ids = set() if named is None else set(named.ids())
        return ids | {conversation} if conversation else ids

    def open_turns(self, key: Key, trace_id: str, turns: tuple[str, ...]) -> list[str]:
        """The conversation's runs other than `trace_id` seen within the horizon that are not
        among its session's `turns` (nor, as their spans stand now, of another session)."""
        now = self.clock.monotonic()
        if now < self._blind_until:
            return [UNREAD]
        oldest = now - self.horizon
        with self._lock:
            runs = self._seen.get(key)
            if runs is None:
                return []
            for gone in [t for t, at in runs.items() if at < oldest]:
                del runs[gone]
            return [
                t
                for t in runs
                if t != trace_id
                and t not in turns
                and (not self.attribute or self._may_be(key[0], t))
            ]


def _last(runs: dict[str, float]) -> float:
    """When a conversation's latest run was last seen (its runs are in the order seen)."""
    return next(reversed(runs.values()), float("-inf"))


def columns(table: pa.Table, names: Iterable[str]) -> Iterator[tuple[Any, ...]]:
    """The table's rows as tuples of these columns."""
    return zip(*(table[c].to_pylist() for c in names), strict=True)
