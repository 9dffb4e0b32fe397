"""The session stage: closed runs are made into their sessions (one service's conversation,
or one conversation across services when configured), each touched session's row is replaced,
its session rules run over all its turns on the session's clock, and sessions with no new turn
for `idle_seconds` close.

Like the judge stage it runs beside the pipeline in its own thread, but it is handed its work:
the writer's commit hook queues each commit's closed runs (collector/sessions/handed.py) and
wakes it. When no pack in force has a session rule, a session's new row follows from its
previous row and the new turns' own trajectory rows (collector/sessions/running.py), recently
touched sessions kept in memory, others read from their stored row (unless the filter of
stored keys, collector/store/maybe_stored.py, says there is none): no earlier turn is read
again; a session whose turn came again in a late revision is rebuilt from its turns' rows
(collector/sessions/rebuilt.py), its totals every turn's. When a pack has
session rules, each touched session's latest `max_turns` turns are loaded and the rules run.

The store is read back only for what was not handed: at start (runs closed in the last
`lookback_seconds`) and after runs did not fit the queue, following the stored runs by their
`store_seq` (collector/store/follow.py: each run looked at once, in the order it was stored).
A run a session already holds is skipped, so one both handed and read back counts once. The
follow is moved up to the runs known to have been handed, so reading back after an overflow
starts there, not at the lookback. A late turn reopens a closed session and its rules run
again. A result is stored only when it differs from the rule's last one for the session (a
budget gone over stays one failure, not one per later turn), so decisions count each
violation once; the last one is read from `results` in the snapshot the session's row is
read from (both are committed together), and each is evaluated after the one before it, so
which is last is never a tie (collector/sessions/loaded.py).
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from datetime import datetime, timedelta
from typing import Any

import pyarrow as pa

from collector.clock import Clock, SystemClock
from collector.config.evaluation import SessionsConfig
from collector.evaluation.metrics import RulesMetrics
from collector.evaluation.packs import PackSource, PackText
from collector.sessions.handed import Handed, MayBe
from collector.sessions.held import HeldSessions
from collector.sessions.loaded import (
    ACROSS,
    SESSIONS_OF,
    Key,
    Loader,
    has_session_rules,
    rows_of,
)
from collector.sessions.metrics import SessionMetrics
from collector.sessions.rebuilt import rebuilt
from collector.sessions.running import RUN_COLUMNS, Running, advanced, news
from collector.store.database import Database
from collector.store.follow import IN_ORDER, NEW, Follow
from collector.store.maybe_stored import MaybeStored
from collector.store.reader import Interrupted, Reader, ReadingStage
from collector.store.tables import replacing, rows_table
from collector.store.writer import Writer
from collector.ticker import Ticker

log = logging.getLogger(__name__)
SCAN_ROWS = 5_000
CONVENTIONS = "t.conversation_id"
# A configured attribute is looked for on every span of the run (OpenLLMetry's association
# properties are on all of them), before the conventions' id the run was built with.
CONFIGURED = (
    "coalesce((SELECT min(json_extract_string(s.attributes, $path)) FROM spans s"
    " WHERE s.trace_id = t.trace_id), t.conversation_id)"
)
TURN_COLUMNS = ", ".join(f"t.{c}" for c in RUN_COLUMNS)
NEW_TURNS = f"""
SELECT {TURN_COLUMNS}, {{session}} AS session_id, t.store_seq
FROM trajectories t
WHERE t.is_current AND t.agent_run IS NOT false AND t.{NEW} AND t.closed_at >= $oldest
{IN_ORDER.replace("store_seq", "t.store_seq")}
"""
# the configured attribute on handed runs' spans (received no earlier than their first)
SESSION_IDS = """
SELECT trace_id, min(json_extract_string(attributes, $path)) FROM spans
WHERE received_at >= $since AND trace_id IN (SELECT unnest($ids)) GROUP BY trace_id
"""
STORED_KEYS = "SELECT session_id, session_service FROM sessions"
LAST_STORED = "SELECT max(store_seq) FROM trajectories WHERE store_seq > $after"


class SessionStage(ReadingStage):
    def __init__(
        self,
        config: SessionsConfig,
        database: Database,
        writer: Writer,
        packs: PackSource,
        metrics: SessionMetrics,
        rules_metrics: RulesMetrics,
        clock: Clock | None = None,
    ) -> None:
        self.config = config
        self.writer = writer
        self.packs = packs
        self.metrics = metrics
        self.rules_metrics = rules_metrics
        self.clock = clock or SystemClock()
        self.reader = Reader(database)
        self.enabled = config.enabled
        self.ticker = Ticker("sextant-sessions", self._pause, self.tick)
        self.handed = Handed(
            config.max_queue, bool(config.attribute), metrics.dropped, self.ticker.wake
        )
        metrics.lag.set_function(self._lag)
        self.follow = Follow()  # runs in the order they were stored (collector/store/follow.py)
        self._caught_up = False  # the store has been read up to the runs handed since
        self._caught_drops = 0  # the handed runs dropped that the store was read again for
        self._behind = False  # the last catch-up read a whole page: more to read
        self._failing = False  # the last tick raised: the next waits for the timer or a wake
        self._last_closed: datetime | None = None  # closed_at of the last run read back
        self._working: datetime | None = None  # when the runs being made were committed
        # (store_seq, commit hooks returned after it was read, drops before): once another
        # commit has been handed with no drop, every run up to store_seq has been handed.
        self._mark: tuple[int, int, int] | None = None
        self._next_round = float("-inf")  # when idle sessions are looked for next (monotonic)
        self._running: OrderedDict[Key, Running] = OrderedDict()  # recently touched sessions
        self._stored: MaybeStored[Key] | None = None  # which sessions may have a row (at start)
        self._uncounted: dict[str, int] = {}  # sessions opened, reopened, turns: once stored
        # sessions' turns as loaded for their rules, kept once the runtime guard asks for them
        self.held = HeldSessions()
        self.loader = Loader(config, metrics, rules_metrics, self.held)  # made by loading turns
        self._sql = NEW_TURNS.format(session=CONFIGURED if config.attribute else CONVENTIONS)

    def consume(self, tables: dict[str, pa.Table], received_at: datetime) -> None:
        """Commit hook (the writer's thread): queue the committed runs and wake the stage."""
        if self.enabled:
            self.handed.consume(tables, received_at)

    def _catching_up(self) -> bool:
        return not self._caught_up or self.handed.dropped != self._caught_drops

    def _pause(self) -> float:
        if self._failing:
            return self.config.tick_seconds
        if self._behind or self._catching_up():
            return 0.0
        return max(0.0, self._next_round - self.clock.monotonic())

    def tick(self) -> int:
        """Read back what the store holds that was not handed (at start, after an overflow),
        make the handed runs into sessions, and every `tick_seconds` close the idle ones;
        sessions written."""
        now = self.clock.now()
        texts = [t for t in self.packs.snapshot() if has_session_rules(t)]
        written = 0
        try:
            if self._stored is None:
                self._stored = self._stored_keys()
            if self._catching_up():
                written += self._catch_up(texts, now)
            if not self._behind:
                written += self._handed(texts, now)
            if self.clock.monotonic() >= self._next_round:
                written += self._round(now)
            self._failing = False
        except Interrupted:
            pass  # shutting down: these runs are read again after the next start
        except Exception:  # the ticker logs it; no retry at once, in a loop
            self._failing = True
            raise
        finally:
            failures, self.loader.failures = self.loader.failures, []
            if failures:  # one line a tick, however many sessions
                log.warning(
                    "%d session pack evaluations failed (their results are missing), first: %s",
                    len(failures),
                    failures[0],
                )
        return written

    def _stored_keys(self) -> MaybeStored[Key]:
        stored: MaybeStored[Key] = MaybeStored()
        with self.reader.cursor() as cursor:
            stored.load(cursor, STORED_KEYS)
        return stored

    def _catch_up(self, texts: list[PackText], now: datetime) -> int:
        """The next page of stored runs past the follow, made into sessions."""
        _, drops = self.handed.marks()
        oldest = now - timedelta(seconds=self.config.lookback_seconds)
        with self.reader.cursor() as cursor:
            rows = rows_of(cursor, self._sql, self._scan(oldest))
            sessions, results, states = self._made(cursor, rows, texts, now)
        self._store(sessions, results, states)
        if rows:
            self.follow.advance(rows[-1]["store_seq"])
            self._last_closed = rows[-1]["closed_at"]
        self._behind = len(rows) == SCAN_ROWS
        if not self._behind:  # runs dropped since are read by the next catch-up
            self._caught_up, self._caught_drops = True, drops
        return len(sessions)

    def waiting(self, session_id: str, may_be: MayBe | None = None) -> bool:
        """Whether a closed run may be a turn of this session that is not in it yet: handed and
        not made, or stored and not read back (the stage is catching up); `may_be` tells of handed
        runs' trace ids whether one may be the session's (a configured attribute)."""
        if self._catching_up() or self._behind:
            return True
        return self.handed.waiting(session_id, may_be)

    def _handed(self, texts: list[PackText], now: datetime) -> int:
        runs, first = self.handed.take()
        if first is None:
            return 0
        self._working = first
        try:
            with self.reader.cursor() as cursor:
                sessions, results, states = self._made(
                    cursor, self._identified(cursor, runs), texts, now
                )
            self._store(sessions, results, states)
            self.handed.made()
        except Interrupted:
            raise
        except Exception:  # made again at the next wake
            self.handed.put_back(runs, first)
            raise
        finally:
            self._working = None
        return len(sessions)

    def _identified(self, cursor: Any, runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Handed runs with their session ids."""
        if not self.config.attribute:
            return [{**r, "session_id": r["conversation_id"]} for r in runs]
        firsts = [r["first_received_at"] for r in runs]
        since = min(firsts) if all(firsts) else datetime.min
        ids = [r["trace_id"] for r in runs]
        params = {**self._path(), "ids": ids, "since": since}
        found = dict(cursor.execute(SESSION_IDS, params).fetchall())
        return [{**r, "session_id": found.get(r["trace_id"]) or r["conversation_id"]} for r in runs]

    def _round(self, now: datetime) -> int:
        """Close the idle sessions, count the open ones, and move the follow past the runs
        that have all been handed."""
        self._next_round = self.clock.monotonic() + self.config.tick_seconds
        with self.reader.cursor() as cursor:
            idle = self._idle(cursor, now)
        self._store(idle, [], {})
        with self.reader.cursor() as cursor:
            row = cursor.execute("SELECT count(*) FROM sessions WHERE status = 'open'").fetchone()
            self.metrics.open.set(row[0] if row else 0)
            self._advance(cursor)
        for r in idle:
            self._running.pop((r["session_id"], r["session_service"]), None)
        self.metrics.events.labels("closed").inc(len(idle))
        return len(idle)

    def _advance(self, cursor: Any) -> None:
        """A catch-up after an overflow starts from the last run known to have been handed,
        not from the lookback: a run the store held when it was looked at has been handed
        once a later commit has been (the writer hands each commit before the next)."""
        commits, drops = self.handed.marks()
        if self._mark is not None:
            seq, handed, was = self._mark
            if drops != was or self._catching_up():
                self._mark = None
            elif commits > handed:
                self.follow.advance(seq)
                self._mark = None
        if self._mark is None and not self._catching_up():
            after = -1 if self.follow.after is None else self.follow.after
            last = cursor.execute(LAST_STORED, {"after": after}).fetchone()[0]
            if last is not None:
                self._mark = (last, self.handed.marks()[0], drops)

    def _lag(self) -> float:
        """At scrape: how long the oldest run waiting (or being made) has waited since it was
        committed; while reading back a backlog, how far behind the newest closed run it is."""
        now = self.clock.now()
        if self._behind and self._last_closed is not None:
            return max(0.0, (now - self._last_closed).total_seconds())
        waiting = [at for at in (self._working, self.handed.oldest()) if at is not None]
        return max(0.0, (now - min(waiting)).total_seconds()) if waiting else 0.0

    def _scan(self, oldest: datetime) -> dict[str, Any]:
        return {**self.follow.params(oldest, SCAN_ROWS), **self._path()}

    def _path(self) -> dict[str, Any]:
        if not self.config.attribute:
            return {}
        return {"path": '$."' + self.config.attribute.replace('"', '\\"') + '"'}

    def _made(
        self, cursor: Any, runs: list[dict[str, Any]], texts: list[PackText], now: datetime
    ) -> tuple[list[dict[str, Any]], list[dict[str, Any]], dict[Key, Running]]:
        """Runs made into their sessions: the sessions' new rows, their rules' changed
        results, and the running state of the sessions kept up without their rules."""
        self._uncounted = {}  # of a previous making that was not stored
        turns: dict[Key, list[dict[str, Any]]] = {}
        for run in runs:
            if run["session_id"]:
                service = ACROSS if self.config.across_services else run["service_name"] or ""
                turns.setdefault((run["session_id"], service), []).append(run)
        if texts:  # session rules read every turn: each touched session is loaded
            sessions, results = self.loader.grouped(cursor, closings(turns), texts, now)
            return sessions, results, {}
        self.held.drop(turns)  # made without reading their turns: what is kept is stale
        sessions, states = self._folded(cursor, turns, now)
        return sessions, [], states

    def _folded(
        self, cursor: Any, turns: dict[Key, list[dict[str, Any]]], now: datetime
    ) -> tuple[list[dict[str, Any]], dict[Key, Running]]:
        """The touched sessions' rows from their new turns' own columns (no earlier turn read
        again); a session whose turn came again (a late revision) or that cannot be placed on
        its clock from what its row says is rebuilt from its stored turns."""
        unheld = [k for k in turns if k not in self._running]
        maybe = unheld if self._stored is None else self._stored.maybe_stored(unheld)
        missing = list({k[0] for k in maybe})
        stored = {}
        if missing:
            found = rows_of(cursor, SESSIONS_OF, [missing])
            stored = {(r["session_id"], r["session_service"]): Running.stored(r) for r in found}
        sessions, states, again = [], {}, {}
        counts = self._uncounted = {"opened": 0, "reopened": 0, "turns": 0}
        for key, runs in turns.items():
            before = self._running.get(key) or stored.get(key)
            new, rebuild = news(before, runs)
            after = advanced(before, key, new) if new and not rebuild else None
            if after is not None:
                sessions.append(after.row)
                states[key] = after
                if before is None or before.row["status"] == "closed":
                    counts["opened" if before is None else "reopened"] += 1
                counts["turns"] += len(new)
            elif rebuild or new:
                again[key] = closings({key: runs})[key]
        if again:
            remade, left = rebuilt(cursor, again, counts)
            sessions.extend(state.row for state in remade.values())
            states.update(remade)
            if left:  # a turn's totals past their columns: loaded, as with session rules
                sessions.extend(self.loader.grouped(cursor, left, [], now)[0])
        return sessions, states

    def _idle(self, cursor: Any, now: datetime) -> list[dict[str, Any]]:
        """Open sessions whose last turn closed over `idle_seconds` ago, closed now."""
        cutoff = now - timedelta(seconds=self.config.idle_seconds)
        rows = rows_of(cursor, IDLE, {"cutoff": cutoff})
        return [{**r, "status": "closed", "closed_at": now} for r in rows]

    def _store(
        self,
        sessions: list[dict[str, Any]],
        results: list[dict[str, Any]],
        states: dict[Key, Running],
    ) -> None:
        """Store the rows; then they are counted, and the sessions written are the ones kept
        in memory."""
        tables = {}
        if sessions:
            keys = [(r["session_id"], r["session_service"]) for r in sessions]
            maybe = set(keys if self._stored is None else self._stored.maybe_stored(keys))
            tables["sessions"] = replacing(rows_table("sessions", sessions), keys, maybe)
            if self._stored is not None:
                self._stored.add(keys)  # before the commit
        if results:
            tables["results"] = rows_table("results", results)
        if tables:
            self.writer.record(tables, self.ticker.stopping)
        counts, self._uncounted = self._uncounted, {}
        for event in ("opened", "reopened"):
            if counts.get(event):
                self.metrics.events.labels(event).inc(counts[event])
        self.metrics.turns.inc(counts.get("turns", 0))
        for row in sessions:
            if row["status"] == "open":
                key = (row["session_id"], row["session_service"])
                self._keep(key, states.get(key) or Running.stored(row))

    def _keep(self, key: Key, state: Running) -> None:
        self._running[key] = state
        self._running.move_to_end(key)
        while len(self._running) > self.config.max_cached:
            self._running.popitem(last=False)


IDLE = "SELECT * FROM sessions WHERE status = 'open' AND last_turn_at < $cutoff"


def closings(turns: dict[Key, list[dict[str, Any]]]) -> dict[Key, list[tuple[str, datetime]]]:
    """Each session's runs as (trace id, when it closed)."""
    return {key: [(r["trace_id"], r["closed_at"]) for r in runs] for key, runs in turns.items()}
