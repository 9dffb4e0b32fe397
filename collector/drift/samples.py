"""The samples drift tests need, aggregated in DuckDB: one value per sample unit, tool-call
weights, rule pass shares, and the current window's most shifted runs as evidence.

A sample unit is a run, or a case when runs repeat a case (`case_id`): repeated attempts of one
task are not independent samples, so each case contributes the mean of its attempts.
"""

from __future__ import annotations

import duckdb
import numpy as np

from collector.drift.sides import Side
from collector.store.review_tables import IN_FORCE

UNIT = "coalesce(case_id, trace_id)"
# metric -> SQL of its per-run value (over the columns of Side.sql)
CONTINUOUS = {
    "steps": "steps::DOUBLE",
    "latency": "duration_ms",
    "cost": "cost_usd",
    "tokens": "(coalesce(input_tokens, 0) + coalesce(output_tokens, 0))::DOUBLE",
}
UNITS = {"steps": " steps", "latency": " ms", "cost": " USD", "tokens": " tokens"}
FLAGS = {
    "error_rate": "CASE WHEN status = 'error' OR error_count > 0 THEN 1.0 ELSE 0.0 END",
    "pass_rate": "CASE WHEN verdict IS NULL THEN NULL WHEN verdict = 'pass' THEN 1.0 ELSE 0.0 END",
}
NO_TOOL = "(no tool call)"


def unit_values(cursor: duckdb.DuckDBPyConnection, side: Side) -> dict[str, np.ndarray]:
    """Per sample unit, the mean of each continuous metric and flag (NaN when unknown)."""
    runs, params = side.sql()
    exprs = {**CONTINUOUS, **FLAGS}
    select = ", ".join(f"avg({sql})::DOUBLE AS {name}" for name, sql in exprs.items())
    # Runs without a case are their own unit: no need to group them.
    single = ", ".join(f"({sql})::DOUBLE AS {name}" for name, sql in exprs.items())
    query = (
        f"WITH runs AS ({runs}) SELECT {single} FROM runs WHERE case_id IS NULL"
        f" UNION ALL SELECT {select} FROM runs WHERE case_id IS NOT NULL GROUP BY case_id"
    )
    columns = cursor.execute(query, params).fetchnumpy()
    return {name: filled(columns[name]) for name in exprs}


def filled(column: np.ndarray) -> np.ndarray:
    return np.ma.filled(np.ma.asarray(column, dtype=float), np.nan)


def weighted_units(side: Side) -> tuple[str, list[object]]:
    """The side's runs with their weight: 1, or 1/attempts when the run's case repeats."""
    runs, params = side.sql()
    query = f"""
        WITH runs AS ({runs}),
        cases AS (SELECT case_id, 1.0 / count(*) AS w FROM runs
                  WHERE case_id IS NOT NULL GROUP BY case_id)
        SELECT runs.trace_id, runs.revision, runs.tool_calls, coalesce(cases.w, 1.0) AS w
        FROM runs LEFT JOIN cases ON cases.case_id = runs.case_id
    """
    return query, params


def tools(
    cursor: duckdb.DuckDBPyConnection, side: Side
) -> tuple[dict[str, float], dict[str, float]]:
    """(calls, presence) per tool: the units' calls of it (a case counting its mean calls per
    attempt) and the units that call it (a case counting the share of its attempts that do).
    Runs that call no tool count under `(no tool call)` in both."""
    units, params = weighted_units(side)
    query = f"""
        WITH units AS ({units}),
        per_run AS (SELECT coalesce(s.tool_name, s.name) AS tool, any_value(u.w) AS w,
                           count(*) AS calls
                    FROM units u JOIN steps s ON s.trace_id = u.trace_id
                      AND s.revision = u.revision
                    WHERE s.span_kind = 'tool' GROUP BY u.trace_id, u.revision, tool)
        SELECT tool, sum(w * calls), sum(w) FROM per_run GROUP BY tool
        UNION ALL
        SELECT '{NO_TOOL}', sum(w), sum(w) FROM units WHERE coalesce(tool_calls, 0) = 0
    """
    calls: dict[str, float] = {}
    presence: dict[str, float] = {}
    for tool, weight, used in cursor.execute(query, params).fetchall():
        if weight:
            calls[tool], presence[tool] = float(weight), float(used)
    return calls, presence


def rule_passes(cursor: duckdb.DuckDBPyConnection, side: Side) -> dict[str, tuple[float, int]]:
    """pack/rule -> (units' summed pass share, units) over the side's per-run results."""
    runs, params = side.sql()
    query = f"""
        WITH runs AS ({runs}),
        joined AS (
            SELECT r.pack || '/' || r.rule_id AS rule, runs.case_id,
                   CASE WHEN r.verdict = 'pass' THEN 1.0 ELSE 0.0 END AS ok
            FROM runs JOIN results r ON r.trace_id = runs.trace_id AND r.revision = runs.revision
            WHERE r.scope = 'trajectory' AND r.origin = 'live' AND r.verdict <> 'not_applicable'
              AND {IN_FORCE})
        SELECT rule, sum(ok), count(*) FROM joined WHERE case_id IS NULL GROUP BY rule
        UNION ALL
        SELECT rule, sum(share), count(*) FROM (
            SELECT rule, avg(ok) AS share FROM joined WHERE case_id IS NOT NULL
            GROUP BY rule, case_id) GROUP BY rule
    """
    out: dict[str, tuple[float, int]] = {}
    for rule, hits, units in cursor.execute(query, params).fetchall():
        before = out.get(rule, (0.0, 0))
        out[rule] = (before[0] + float(hits), before[1] + int(units))
    return out


def latest_first(
    cursor: duckdb.DuckDBPyConnection, side: Side, where: str, order: str, limit: int, *extra
) -> list[str]:
    runs, params = side.sql()
    query = (
        f"WITH runs AS ({runs}) SELECT trace_id FROM runs WHERE {where}"
        f" ORDER BY {order} end_time DESC, trace_id LIMIT ?"
    )
    return [r[0] for r in cursor.execute(query, [*params, *extra, limit]).fetchall()]


def continuous_evidence(
    cursor: duckdb.DuckDBPyConnection, side: Side, metric: str, direction: int, limit: int
) -> list[str]:
    """The runs furthest out in the direction the metric moved."""
    sql = CONTINUOUS[metric]
    order = f"{sql} {'ASC' if direction < 0 else 'DESC'},"
    return latest_first(cursor, side, f"{sql} IS NOT NULL", order, limit)


def flag_evidence(
    cursor: duckdb.DuckDBPyConnection, side: Side, metric: str, direction: int, limit: int
) -> list[str]:
    """Runs that show the change: with errors when errors rose, not passing when passes fell."""
    wanted = 1.0 if direction > 0 else 0.0
    return latest_first(cursor, side, f"({FLAGS[metric]}) = ?", "", limit, wanted)


def rule_evidence(
    cursor: duckdb.DuckDBPyConnection, side: Side, rule: str, direction: int, limit: int
) -> list[str]:
    pack, rule_id = rule.split("/", 1)
    verdict = "= 'pass'" if direction > 0 else "IN ('fail', 'review')"
    where = (
        "EXISTS (SELECT 1 FROM results r WHERE r.trace_id = runs.trace_id"
        " AND r.revision = runs.revision AND r.scope = 'trajectory' AND r.origin = 'live'"
        f" AND r.pack = ? AND r.rule_id = ? AND r.verdict {verdict})"
    )
    return latest_first(cursor, side, where, "", limit, pack, rule_id)


def tool_evidence(
    cursor: duckdb.DuckDBPyConnection,
    side: Side,
    gained: list[str],
    lost: list[str],
    limit: int,
) -> list[str]:
    """Runs calling tools that gained share (first those the baseline never used) or lacking
    tools the baseline always used, the most such differences first."""
    runs, params = side.sql()
    query = f"""
        WITH runs AS ({runs}),
        used AS (SELECT runs.trace_id, any_value(runs.end_time) AS end_time,
                 list(DISTINCT coalesce(s.tool_name, s.name))
                   FILTER (WHERE s.span_kind = 'tool') AS tools
                 FROM runs LEFT JOIN steps s
                   ON s.trace_id = runs.trace_id AND s.revision = runs.revision
                 GROUP BY runs.trace_id, runs.revision),
        scored AS (SELECT trace_id, end_time,
                   len(list_intersect(coalesce(tools, []), ?::VARCHAR[]))
                   + len(?::VARCHAR[]) - len(list_intersect(coalesce(tools, []), ?::VARCHAR[]))
                   AS score FROM used)
        SELECT trace_id FROM scored WHERE score > 0
        ORDER BY score DESC, end_time DESC, trace_id LIMIT ?
    """
    return [r[0] for r in cursor.execute(query, [*params, gained, lost, lost, limit]).fetchall()]
