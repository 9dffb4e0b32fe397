"""A session's `sessions` row from its turns, and the session rules' results as `results` rows."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from collector.assembler.records import objecting_rules
from collector.clock import naive_utc
from collector.evaluation.results import trajectory_result_rows
from evaluators.base import Result, overall_verdict
from evaluators.sessions import Session

# the totals a session sums over its turns, as a run's `totals()` names them
TOTALS = ("steps", "tool_calls", "llm_calls", "input_tokens", "output_tokens", "error_count")


def stamp(nanos: int) -> datetime | None:
    return naive_utc(nanos / 1e9) if nanos else None


def session_row(
    session: Session,
    trace_ids: list[str],
    before: dict[str, Any] | None,
    last_turn_at: datetime,
    results: list[Result],
) -> dict[str, Any]:
    """The open session after a turn: totals over the turns it could load, the target of the
    turn that arrived last; a closed one that got a late turn is open again and counts the
    reopening."""
    turns = session.turns
    last = turns[-1]
    whole = session.merged()
    totals = whole.totals()
    reopened = (before or {}).get("reopened", 0)
    if before is not None and before["status"] == "closed":
        reopened += 1
    return {
        "session_id": session.session_id,
        "status": "open",
        "service_name": last.service_name,
        "agent_name": last.agent_name,
        "service_version": last.service_version,
        "user_id": next((t.user_id for t in reversed(turns) if t.user_id), None),
        "turns": len(trace_ids),
        "trace_ids": trace_ids,
        "started_at": stamp(whole.start_time_unix_nano),
        "ended_at": stamp(whole.end_time_unix_nano),
        **{k: totals[k] for k in TOTALS},
        "cost_usd": totals["cost_usd"] or 0.0,
        "verdict": overall_verdict(results).value if results else "none",
        "verdict_rules": objecting_rules(results),
        "reopened": reopened,
        "last_turn_at": max(last_turn_at, (before or {}).get("last_turn_at") or last_turn_at),
        "closed_at": None,
    }


def session_result_rows(
    session: Session, results: list[Result], shas: dict[str, str], at: datetime
) -> list[dict[str, Any]]:
    """Each result is about the turn it names last (the write, the latest failure, else the
    latest turn its pack read), and takes that turn's target, which its pack selected; its
    evidence runs are every turn it names."""
    by_trace = {t.trace_id: t for t in session.turns}
    rows = []
    for result in results:
        turn = by_trace.get(result.traces[-1]) if result.traces else None
        turn = turn or session.turns[-1]
        (row,) = trajectory_result_rows(turn, [result], shas, at)
        row.update(
            scope="session",
            session_id=session.session_id,
            evidence_trace_ids=list(result.traces) or [turn.trace_id],
        )
        rows.append(row)
    return rows
