"""Trajectories as rows of the `trajectories` and `steps` tables."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import orjson
import pyarrow as pa

from collector.store.tables import out_of_range, rows_table
from evaluators.base import Result, Verdict, overall_verdict
from evaluators.model import Trajectory

OBJECTING = (Verdict.FAIL, Verdict.REVIEW)


def trajectory_row(
    t: Trajectory,
    first_received: datetime,
    last_received: datetime,
    closed_at: datetime,
    results: list[Result],
    build_error: str | None = None,
) -> dict[str, Any]:
    totals = t.totals()
    row = {
        "trace_id": t.trace_id,
        "revision": t.revision,
        "is_current": True,
        "status": t.status,
        "close_reason": t.close_reason,
        "incomplete_reasons": t.incomplete_reasons or None,
        "agent_run": t.agent_run,
        "service_name": t.service_name,
        "agent_name": t.agent_name,
        "service_version": t.service_version,
        "root_span_id": t.root_span_id,
        "root_name": t.root_name,
        "case_id": t.case_id,
        "conversation_id": t.conversation_id,
        "user_id": t.user_id,
        "input": t.input,
        "final_output": t.final_output,
        "steps": totals["steps"],
        "tool_calls": totals["tool_calls"],
        "llm_calls": totals["llm_calls"],
        "input_tokens": totals["input_tokens"],
        "output_tokens": totals["output_tokens"],
        "cost_usd": totals["cost_usd"],
        "unpriced_llm_calls": totals["unpriced_llm_calls"],
        "error_count": totals["error_count"],
        "span_count": t.span_count,
        "late_spans": t.late_spans,
        "start_time_unix_nano": t.start_time_unix_nano,
        "end_time_unix_nano": t.end_time_unix_nano,
        "first_received_at": first_received,
        "last_received_at": last_received,
        "closed_at": closed_at,
        # No rule applied: no verdict (an unevaluated run is not a pass).
        "verdict": overall_verdict(results).value if results else None,
        "verdict_reasons": sorted({r.reason for r in results if r.reason}) or None,
        "verdict_rules": objecting_rules(results),
        "build_error": build_error,
    }
    # Totals past their column's range (token counts summed past int64) are kept as text; the
    # run was evaluated on the true value.
    unrepresentable = out_of_range("trajectories", row)
    row["unrepresentable"] = orjson.dumps(unrepresentable).decode() if unrepresentable else None
    return row


def objecting_rules(results: list[Result]) -> list[str] | None:
    """pack/rule of the results that failed or reviewed the run (what the list filters by)."""
    objecting = {f"{r.pack}/{r.rule_id}" for r in results if r.verdict in OBJECTING}
    return sorted(objecting) or None


def step_rows(t: Trajectory) -> list[dict[str, Any]]:
    rows = []
    for s in t.steps:
        row = {
            "trace_id": t.trace_id,
            "revision": t.revision,
            "seq": s.seq,
            "span_id": s.span_id,
            "parent_span_id": s.parent_span_id,
            "depth": s.depth,
            "kind": s.kind,
            "span_kind": s.span_kind,
            "name": s.name,
            "agent_name": s.agent_name,
            "tool_name": s.tool_name,
            "tool_call_id": s.tool_call_id,
            "arguments": None
            if s.arguments is None
            else orjson.dumps(s.arguments, option=orjson.OPT_NON_STR_KEYS).decode(),
            "result": s.result,
            "status": s.status,
            "error_type": s.error_type,
            "model": s.model,
            "input_tokens": s.input_tokens,
            "output_tokens": s.output_tokens,
            "cost_usd": s.cost_usd,
            "approval_status": s.approval_status,
            "policy_name": s.policy_name,
            "policy_decision": s.policy_decision,
            "state_target": s.state_target,
            "mcp": None if s.mcp is None else orjson.dumps(s.mcp).decode(),
            "requested_by": s.requested_by,
            "start_time_unix_nano": s.start_time_unix_nano,
            "end_time_unix_nano": s.end_time_unix_nano,
        }
        rows.append(row)
    return rows


def as_tables(rows: dict[str, list[dict[str, Any]]]) -> dict[str, pa.Table]:
    return {table: rows_table(table, table_rows) for table, table_rows in rows.items()}
