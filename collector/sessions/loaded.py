"""Sessions made by loading their turns: each touched session's latest `max_turns` turns are
loaded from the store, placed on the session's clock, its session rules run over them, and its
row and the rules' changed results are made. The stage does this when a pack in force has
session rules, and for a session with a turn whose totals its row cannot hold.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any

from collector.config.evaluation import SessionsConfig
from collector.evaluation.metrics import RulesMetrics
from collector.evaluation.packs import PackText, compiled
from collector.sessions.held import HeldSessions, Key, SessionTurns
from collector.sessions.metrics import SessionMetrics
from collector.sessions.rows import session_result_rows, session_row
from collector.sessions.turns import on_session_clock
from collector.store.queries import rows_as_dicts
from collector.store.runs import DuckDBSource, load_trajectories
from evaluators.base import Decision, Result, Verdict
from evaluators.evaluate import evaluate_session_pack, proven
from evaluators.sessions import Session, is_session_rule

ACROSS = "*"  # the service of a session grouped across services
SESSIONS_OF = "SELECT * FROM sessions WHERE session_id IN ?"
# when a turn first closed (its first revision), and when its current revision began
TURN_TIMES = """
SELECT trace_id, min(closed_at), max(start_time_unix_nano) FILTER (WHERE is_current)
FROM trajectories WHERE trace_id IN ? GROUP BY trace_id HAVING bool_or(is_current)
"""
KEY = ("pack_version", "verdict", "reason", "evidence_span_ids", "trace_id", "revision")
# Each session rule's last result (its key's columns, then when it was evaluated): what a new
# one is compared with, and what it must be evaluated after.
LAST_RESULTS = """
SELECT session_id, coalesce(service_name, ''), pack, rule_id,
       pack_version, verdict, reason, evidence_span_ids, trace_id, revision, evaluated_at
FROM results WHERE scope = 'session' AND origin = 'live' AND session_id IN ?
QUALIFY row_number() OVER (
  PARTITION BY session_id, coalesce(service_name, ''), pack, rule_id ORDER BY evaluated_at DESC
) = 1
"""


class Loader:
    """Makes sessions from their loaded turns, counting them in the stage's metrics."""

    def __init__(
        self,
        config: SessionsConfig,
        metrics: SessionMetrics,
        rules_metrics: RulesMetrics,
        held: HeldSessions | None = None,
    ) -> None:
        self.config = config
        self.metrics = metrics
        self.rules_metrics = rules_metrics
        self.held = held  # each session's turns as loaded, for the runtime guard
        self.failures: list[str] = []  # packs that raised past evaluate_session_pack

    def grouped(
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
        ordered, arrived = in_order(cursor, fresh, before)
        window = self.config.max_turns
        loaded = load_trajectories(
            DuckDBSource(cursor, "store"), [t for ts in ordered.values() for t in ts[-window:]]
        )
        by_trace = {t.trace_id: t for t in loaded}
        stored = cursor.execute(LAST_RESULTS, [list({sid for sid, _ in fresh})]).fetchall()
        last = {tuple(r[:4]): tuple(v or None for v in r[4:-1]) for r in stored}
        latest: dict[str, datetime] = {}  # each session's last result, when evaluated
        for r in stored:
            latest[r[0]] = max(r[-1], latest.get(r[0], r[-1]))
        shas = {t.name: t.sha256 for t in texts}
        sessions, results = [], []
        for key, traces in ordered.items():
            sid, service = key
            runs = [by_trace[t] for t in traces[-window:] if t in by_trace]
            if not runs:
                continue
            session = Session(sid, on_session_clock(runs, arrived))
            if self.held is not None:
                self.held.put(key, SessionTurns(tuple(traces), session.turns))
            found = self._evaluate(session, texts, truncated=len(traces) > len(runs))
            rows = session_result_rows(session, found, shas, after(now, latest.get(sid)))
            changed = [r for r in rows if last.get(result_key(sid, r)) != key_of(r)]
            results.extend(changed)
            closed_at = max(at for _, at in fresh[key])
            row = session_row(session, traces, before.get(key), closed_at, found)
            sessions.append({**row, "session_service": service})
            self.count(before.get(key), fresh[key], changed)
        return sessions, results

    def _evaluate(self, session: Session, texts: list[PackText], truncated: bool) -> list[Result]:
        out: list[Result] = []
        for text in texts:
            pack = compiled(text)
            try:
                found = evaluate_session_pack(session, pack)
            except Exception as exc:  # evaluate_session_pack reviews its own errors
                self.failures.append(f"session {session.session_id}: pack {pack.name}: {exc!r}")
                continue
            if truncated:  # rules that read fewer turns than there are
                found = [truncate(r, self.config.max_turns) for r in found]
            out.extend(found)
        return out

    def count(
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


def in_order(
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


def after(now: datetime, last: datetime | None) -> datetime:
    """When a session's results are evaluated: now, unless that is not after its last stored
    result. A rule's last result is the one evaluated last, so two evaluations must never
    share an instant: a tick makes both the runs it read back (at start) and the runs handed
    meanwhile at one `now`, and a wall clock can step back across a restart. A tie would let
    the one made first pass for the last, and the next evaluation store the later again."""
    if last is None or now > last:
        return now
    return last + timedelta(microseconds=1)  # the store keeps microseconds


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


def read_turns(cursor: Any, key: Key, window: int) -> SessionTurns:
    """A session's turns from the store as the stage last made them (its row's turns, in
    order, the latest `window` loaded); none when it has no row (no turn has closed)."""
    session_id, service = key
    rows = [
        r for r in rows_of(cursor, SESSIONS_OF, [[session_id]]) if r["session_service"] == service
    ]
    if not rows:
        return SessionTurns((), [])
    ordered, arrived = in_order(cursor, {key: []}, {key: rows[0]})
    traces = ordered[key]
    loaded = {
        t.trace_id: t for t in load_trajectories(DuckDBSource(cursor, "store"), traces[-window:])
    }
    runs = [loaded[t] for t in traces[-window:] if t in loaded]
    return SessionTurns(tuple(traces), on_session_clock(runs, arrived))
