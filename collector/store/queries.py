"""Read queries shared by the admin API and the command line."""

from __future__ import annotations

from dataclasses import asdict
from datetime import datetime
from typing import Any

import duckdb
import orjson

from collector.store.listing import Cursor, page_query, split_page
from evaluators.documents import Document, documents_of

# Rule types whose results come after the run's round (beside the pipeline), so their
# evaluated_at is not the trajectory's closed_at.
LATER_RULE_TYPES = ("judge", "similarity", "evaluation")


def rows_as_dicts(cursor: duckdb.DuckDBPyConnection) -> list[dict[str, Any]]:
    names = [d[0] for d in cursor.description]
    return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]


def jsonable(row: dict[str, Any]) -> dict[str, Any]:
    return {k: v.isoformat() + "Z" if isinstance(v, datetime) else v for k, v in row.items()}


def summary(document: Document) -> dict[str, Any]:
    """A document as the API lists it: its id, score, length and metadata (not its text)."""
    listed = asdict(document)
    listed.pop("content")
    return listed


def load_trajectory(
    cursor: duckdb.DuckDBPyConnection, trace_id: str, revision: int | None = None
) -> dict[str, Any] | None:
    """The current (or a given) revision of a trajectory with its steps, ready for JSON."""
    if revision is None:
        cursor.execute(
            "SELECT * FROM trajectories WHERE trace_id = ? AND is_current", [trace_id.lower()]
        )
    else:
        cursor.execute(
            "SELECT * FROM trajectories WHERE trace_id = ? AND revision = ?",
            [trace_id.lower(), revision],
        )
    found = rows_as_dicts(cursor)
    if not found:
        return None
    found[0].pop("store_seq", None)  # the store's bookkeeping, not the run's
    trajectory = jsonable(found[0])
    cursor.execute(
        "SELECT * EXCLUDE (trace_id, revision) FROM steps"
        " WHERE trace_id = ? AND revision = ? ORDER BY seq",
        [trajectory["trace_id"], trajectory["revision"]],
    )
    steps = rows_as_dicts(cursor)
    # The span attributes, for readers and for `sextant rules test` cases; the received_at window
    # lets DuckDB skip every row group outside the run's own.
    cursor.execute(
        "SELECT span_id, attributes FROM spans WHERE trace_id = ? AND received_at BETWEEN ? AND ?",
        [trajectory["trace_id"], found[0]["first_received_at"], found[0]["last_received_at"]],
    )
    attributes = dict(cursor.fetchall())
    for step in steps:
        for key in ("arguments", "mcp"):
            if step[key] is not None:
                step[key] = orjson.loads(step[key])
        step["attributes"] = orjson.loads(attributes.get(step["span_id"]) or "{}")
        if step["kind"] == "retrieval":  # what it returned, whatever wrote it (ids, scores...)
            listed = documents_of(step["attributes"])  # None: it recorded nothing about them
            step["documents"] = None if listed is None else [summary(d) for d in listed]
    steps = [jsonable(step) for step in steps]
    trajectory["steps_detail"] = steps
    cursor.execute(
        "SELECT revision FROM trajectories WHERE trace_id = ? ORDER BY revision",
        [trajectory["trace_id"]],
    )
    trajectory["revisions"] = [r[0] for r in cursor.fetchall()]
    cursor.execute(
        "SELECT * EXCLUDE (trace_id, revision, service_name, agent_name, service_version)"
        " FROM results WHERE trace_id = ? AND revision = ? AND (evaluated_at = ? OR"
        # what layer 3 said later: judges, similarity, evaluation events and their rules
        f" (origin IN ('live', 'external') AND rule_type IN {LATER_RULE_TYPES})"
        # and the session rules' results that name this run, and reviewers' labels
        " OR (origin = 'live' AND scope = 'session') OR source = 'human')"
        " ORDER BY pack, rule_id, evaluated_at",
        [trajectory["trace_id"], trajectory["revision"], found[0]["closed_at"]],
    )
    trajectory["results"] = [jsonable(r) for r in rows_as_dicts(cursor)]
    return trajectory


SUMMARY_COLUMNS = (
    *("trace_id", "revision", "status", "close_reason", "agent_run", "service_name"),
    *("agent_name", "service_version", "case_id", "steps", "tool_calls", "llm_calls"),
    *("input_tokens", "output_tokens", "cost_usd", "error_count", "duration_ms", "start_time"),
    "closed_at",
)


def list_trajectories(
    cursor: duckdb.DuckDBPyConnection,
    filters: dict[str, Any],
    limit: int,
    after: Cursor | None = None,
    columns: tuple[str, ...] = SUMMARY_COLUMNS,
    sort: str = "time",
) -> tuple[list[dict[str, Any]], str | None]:
    """A page of current trajectories, most recently closed (or by `sort`) first, and the next
    page's cursor."""
    sql, params = page_query(filters, limit, after, columns, sort)
    cursor.execute(sql, params)
    rows, following = split_page(rows_as_dicts(cursor), limit, sort)
    return [jsonable(row) for row in rows], following
