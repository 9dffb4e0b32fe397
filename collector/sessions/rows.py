"""A session's `sessions` row from its turns, and the session rules' results as `results` rows."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from collector.clock import naive_utc
from collector.evaluation.results import trajectory_result_rows
from evaluators.base import Result, Verdict, overall_verdict
from evaluators.sessions import Session


def stamp(nanos: int) -> datetime | None:
    return naive_utc(nanos / 1e9) if nanos else None


def session_row(
    session: Session,
    trace_ids: list[str],
    before: dict[str, Any] | None,
    last_turn_at: datetime,
    results: list[Result],
) -> dict[str, Any]:
    """The open session after a turn: totals over the turns it could load; a closed one that
    got a late turn is open again and counts the reopening."""
    turns = session.turns
    last = turns[-1]
    failing = [r for r in results if r.verdict in (Verdict.FAIL, Verdict.REVIEW)]
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
        "started_at": stamp(min(t.start_time_unix_nano for t in turns)),
        "ended_at": stamp(max(t.end_time_unix_nano for t in turns)),
        "steps": sum(len(t.steps) for t in turns),
        "tool_calls": sum(t.tool_calls for t in turns),
        "llm_calls": sum(t.llm_calls for t in turns),
        "input_tokens": sum(t.input_tokens for t in turns),
        "output_tokens": sum(t.output_tokens for t in turns),
        "cost_usd": sum(t.cost_usd or 0.0 for t in turns),
        "error_count": sum(t.error_count for t in turns),
        "verdict": overall_verdict(results).value if results else "none",
        "verdict_rules": sorted({f"{r.pack}/{r.rule_id}" for r in failing}) or None,
        "reopened": reopened,
        "last_turn_at": max(last_turn_at, (before or {}).get("last_turn_at") or last_turn_at),
        "closed_at": None,
    }


def session_result_rows(
    session: Session, results: list[Result], shas: dict[str, str], at: datetime
) -> list[dict[str, Any]]:
    """Each result is about the turn it names last (the write, the latest failure), else the
    latest turn; its evidence runs are every turn it names. The session's target is its latest
    turn's, which the pack selected."""
    by_trace = {t.trace_id: t for t in session.turns}
    last = session.turns[-1]
    rows = trajectory_result_rows(last, results, shas, at)
    for row, result in zip(rows, results, strict=True):
        turn = by_trace.get(result.traces[-1]) if result.traces else None
        turn = turn or last
        row.update(
            trace_id=turn.trace_id,
            revision=turn.revision,
            scope="session",
            session_id=session.session_id,
            evidence_trace_ids=list(result.traces) or [turn.trace_id],
        )
    return rows
