"""The session stage: runs closed since the last look are grouped into their sessions (one
service's conversation, or one conversation across services when configured), each touched
session's row is replaced, its session rules run over all its turns on the session's clock,
and sessions with no new turn for `idle_seconds` close.

Like the judge stage it runs beside the pipeline in its own thread and follows the stored runs
by their `store_seq` (collector/store/follow.py: each run looked at once, in the order it was
stored, however many share a commit), so a backlog costs no memory and a restart goes back
`lookback_seconds`. A late turn reopens a closed session and its rules run again. A result is
stored only when it differs from the rule's last one for the session (a budget gone over stays
one failure, not one per later turn), so decisions count each violation once.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any

from collector.clock import Clock, SystemClock
from collector.config.evaluation import SessionsConfig
from collector.evaluation.metrics import RulesMetrics
from collector.evaluation.packs import PackSource, PackText, compiled
from collector.sessions.metrics import SessionMetrics
from collector.sessions.rows import session_result_rows, session_row
from collector.sessions.turns import on_session_clock
from collector.store.database import Database
from collector.store.follow import IN_ORDER, NEW, Follow
from collector.store.queries import rows_as_dicts
from collector.store.reader import Interrupted, Reader, ReadingStage
from collector.store.runs import DuckDBSource, load_trajectories
from collector.store.tables import rows_table
from collector.store.writer import Writer
from collector.ticker import Ticker
from evaluators.base import Decision, Result, Verdict
from evaluators.evaluate import evaluate_session_pack, proven
from evaluators.sessions import Session, is_session_rule

log = logging.getLogger(__name__)
STORE_TIMEOUT_SECONDS = 30.0
SCAN_ROWS = 5_000
CONVENTIONS = "t.conversation_id"
# A configured attribute is looked for on every span of the run (OpenLLMetry's association
# properties are on all of them), before the conventions' id the run was built with.
CONFIGURED = (
    "coalesce((SELECT min(json_extract_string(s.attributes, $path)) FROM spans s"
    " WHERE s.trace_id = t.trace_id), t.conversation_id)"
)
NEW_TURNS = f"""
SELECT t.trace_id, t.closed_at, {{session}} AS session_id, coalesce(t.service_name, ''),
       t.store_seq
FROM trajectories t
WHERE t.is_current AND t.agent_run IS NOT false AND t.{NEW} AND t.closed_at >= $oldest
{IN_ORDER.replace("store_seq", "t.store_seq")}
"""
LAST_RESULTS = """
SELECT session_id, coalesce(service_name, ''), pack, rule_id,
       pack_version, verdict, reason, evidence_span_ids, trace_id, revision
FROM results WHERE scope = 'session' AND origin = 'live' AND session_id IN ?
QUALIFY row_number() OVER (
  PARTITION BY session_id, coalesce(service_name, ''), pack, rule_id ORDER BY evaluated_at DESC
) = 1
"""


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
        self._behind = False
        self.follow = Follow()  # runs in the order they were stored (collector/store/follow.py)
        self._last_closed: datetime | None = None  # closed_at of the last run looked at
        self._failures: list[str] = []  # a tick's packs that raised past evaluate_session_pack
        self._sql = NEW_TURNS.format(session=CONFIGURED if config.attribute else CONVENTIONS)

    def _pause(self) -> float:
        return 0.0 if self._behind else self.config.tick_seconds

    def tick(self) -> int:
        """Group the next runs into sessions and close the idle ones; sessions written."""
        now = self.clock.now()
        oldest = now - timedelta(seconds=self.config.lookback_seconds)
        texts = [t for t in self.packs.snapshot() if has_session_rules(t)]
        try:
            with self.reader.cursor() as cursor:
                rows = cursor.execute(self._sql, self._scan(oldest)).fetchall()
                turns: dict[Key, list[tuple[str, datetime]]] = {}
                for trace_id, closed_at, session_id, service, _ in rows:
                    if session_id:
                        key = (session_id, ACROSS if self.config.across_services else service)
                        turns.setdefault(key, []).append((trace_id, closed_at))
                sessions, results = self._grouped(cursor, turns, texts, now)
                idle = self._idle(cursor, now, set(turns))
            self._store([*sessions, *idle], results)
        except Interrupted:
            return 0  # shutting down: these runs are grouped again after the next start
        finally:
            if self._failures:  # one line a tick, however many sessions
                log.warning(
                    "%d session pack evaluations failed (their results are missing), first: %s",
                    len(self._failures),
                    self._failures[0],
                )
                self._failures = []
        self.metrics.events.labels("closed").inc(len(idle))
        if rows:
            self.follow.advance(rows[-1][4])
            self._last_closed = rows[-1][1]
        self._behind = len(rows) == SCAN_ROWS
        last_closed = self._last_closed if self._behind else None
        self.metrics.lag.set((now - last_closed).total_seconds() if last_closed else 0.0)
        return len(sessions) + len(idle)

    def _scan(self, oldest: datetime) -> dict[str, Any]:
        scan = self.follow.params(oldest, SCAN_ROWS)
        if self.config.attribute:
            scan["path"] = '$."' + self.config.attribute.replace('"', '\\"') + '"'
        return scan

    def _grouped(
        self,
        cursor: Any,
        turns: dict[Key, list[tuple[str, datetime]]],
        texts: list[PackText],
        now: datetime,
    ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """The touched sessions' new rows, and their session rules' changed results."""
        ids = list({sid for sid, _ in turns})
        before = {
            (r["session_id"], r["session_service"]): r for r in rows_of(cursor, SESSIONS_OF, [ids])
        }
        # Runs a session holds already (read again after a restart) change nothing.
        fresh = {key: new for key, new in turns.items() if is_news(before.get(key), new)}
        if not fresh:
            return [], []
        ordered, arrived = self._ordered(cursor, fresh, before)
        window = self.config.max_turns
        loaded = load_trajectories(
            DuckDBSource(cursor, "store"), [t for ts in ordered.values() for t in ts[-window:]]
        )
        by_trace = {t.trace_id: t for t in loaded}
        stored = cursor.execute(LAST_RESULTS, [list({sid for sid, _ in fresh})]).fetchall()
        last = {tuple(r[:4]): tuple(v or None for v in r[4:]) for r in stored}
        shas = {t.name: t.sha256 for t in texts}
        sessions, results = [], []
        for key, traces in ordered.items():
            sid, service = key
            runs = [by_trace[t] for t in traces[-window:] if t in by_trace]
            if not runs:
                continue
            session = Session(sid, on_session_clock(runs, arrived))
            found = self._evaluate(session, texts, truncated=len(traces) > len(runs))
            rows = session_result_rows(session, found, shas, now)
            changed = [r for r in rows if last.get(result_key(sid, r)) != key_of(r)]
            results.extend(changed)
            closed_at = max(at for _, at in fresh[key])
            row = session_row(session, traces, before.get(key), closed_at, found)
            sessions.append({**row, "session_service": service})
            self._count(before.get(key), fresh[key], changed)
        return sessions, results

    def _ordered(
        self,
        cursor: Any,
        fresh: dict[Key, list[tuple[str, datetime]]],
        before: dict[Key, dict[str, Any]],
    ) -> tuple[dict[Key, list[str]], dict[str, datetime]]:
        """Each session's turns still stored, in the order they arrived (a turn retention
        deleted drops out), and when each first closed. The turns a session held keep their
        order; new ones follow by when they first closed, then by start."""
        wanted = {
            key: [*(before.get(key, {}).get("trace_ids") or []), *(t for t, _ in new)]
            for key, new in fresh.items()
        }
        every = list({t for traces in wanted.values() for t in traces})
        times = {t: (at, start) for t, at, start in cursor.execute(TURN_TIMES, [every]).fetchall()}
        ordered = {}
        for key, traces in wanted.items():
            known = list(dict.fromkeys(before.get(key, {}).get("trace_ids") or []))
            new = set(traces) - set(known)
            ordered[key] = [t for t in known if t in times] + sorted(
                new & times.keys(), key=lambda t: (times[t][0], times[t][1], t)
            )
        return ordered, {t: at for t, (at, _) in times.items()}

    def _evaluate(self, session: Session, texts: list[PackText], truncated: bool) -> list[Result]:
        out: list[Result] = []
        for text in texts:
            pack = compiled(text)
            try:
                found = evaluate_session_pack(session, pack)
            except Exception as exc:  # evaluate_session_pack reviews its own errors
                self._failures.append(f"session {session.session_id}: pack {pack.name}: {exc!r}")
                continue
            if truncated:  # rules that read fewer turns than there are
                found = [truncate(r, self.config.max_turns) for r in found]
            out.extend(found)
        return out

    def _idle(self, cursor: Any, now: datetime, touched: set[Key]) -> list[dict[str, Any]]:
        """Open sessions whose last turn closed over `idle_seconds` ago, closed now."""
        cutoff = now - timedelta(seconds=self.config.idle_seconds)
        rows = rows_of(cursor, IDLE, {"cutoff": cutoff})
        return [
            {**r, "status": "closed", "closed_at": now}
            for r in rows
            if (r["session_id"], r["session_service"]) not in touched
        ]

    def _store(self, sessions: list[dict[str, Any]], results: list[dict[str, Any]]) -> None:
        tables = {}
        if sessions:
            tables["sessions"] = rows_table("sessions", sessions)
        if results:
            tables["results"] = rows_table("results", results)
        if tables:
            self.writer.submit_tables(tables).result(STORE_TIMEOUT_SECONDS)
        with self.reader.cursor() as cursor:
            row = cursor.execute("SELECT count(*) FROM sessions WHERE status = 'open'").fetchone()
        self.metrics.open.set(row[0] if row else 0)

    def _count(
        self,
        before: dict[str, Any] | None,
        new: list[tuple[str, datetime]],
        changed: list[dict[str, Any]],
    ) -> None:
        if before is None:
            self.metrics.events.labels("opened").inc()
        elif before["status"] == "closed":
            self.metrics.events.labels("reopened").inc()
        known = set((before or {}).get("trace_ids") or ())
        self.metrics.turns.inc(len({t for t, _ in new} - known))
        for r in changed:
            labels = (r["pack"], r["rule_id"], r["verdict"], r["reason"] or "")
            self.rules_metrics.results.labels(*labels).inc()


Key = tuple[str, str]  # (session id, its service, or ACROSS)
ACROSS = "*"  # the service of a session grouped across services
SESSIONS_OF = "SELECT * FROM sessions WHERE session_id IN ?"
IDLE = "SELECT * FROM sessions WHERE status = 'open' AND last_turn_at < $cutoff"
# when a turn first closed (its first revision), and when its current revision began
TURN_TIMES = """
SELECT trace_id, min(closed_at), max(start_time_unix_nano) FILTER (WHERE is_current)
FROM trajectories WHERE trace_id IN ? GROUP BY trace_id HAVING bool_or(is_current)
"""
KEY = ("pack_version", "verdict", "reason", "evidence_span_ids", "trace_id", "revision")


def rows_of(cursor: Any, sql: str, params: Any) -> list[dict[str, Any]]:
    cursor.execute(sql, params)
    return rows_as_dicts(cursor)


def is_news(before: dict[str, Any] | None, new: list[tuple[str, datetime]]) -> bool:
    """Whether these runs change the session: a turn it lacks, or a turn closed again since
    (a late revision); not the runs it holds, read again after a restart."""
    if before is None:
        return True
    known = set(before["trace_ids"] or ())
    return any(t not in known or at > before["last_turn_at"] for t, at in new)


def result_key(session_id: str, row: dict[str, Any]) -> tuple[str, str, str, str]:
    """Whose last result a new one is compared with: the session's rule, for the turn's service."""
    return (session_id, row["service_name"] or "", row["pack"], row["rule_id"])


def key_of(row: dict[str, Any]) -> tuple[Any, ...]:
    """What makes a result new for its session: its pack version, verdict, reason, evidence,
    and the turn (and revision) it names: a rebuilt turn's result is stored again, since
    decisions count only results of a turn's current revision."""
    return tuple(row[k] or None for k in KEY)


def truncate(r: Result, max_turns: int) -> Result:
    """A result over the latest `max_turns` turns of a longer session: only a failure shown
    by steps that are there, and that the missing turns could not undo, stands."""
    if proven(r.rule_type, r.verdict, r.evidence):
        return r
    return replace(
        r,
        verdict=Verdict.REVIEW,
        reason="session_truncated",
        requested_decision=Decision.REVIEW,
        message=f"only the last {max_turns} turns were read; would be {r.verdict}: {r.message}",
    )


def has_session_rules(text: PackText) -> bool:
    return any(is_session_rule(r) for r in compiled(text).rules)
