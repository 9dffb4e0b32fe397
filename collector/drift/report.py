"""`sextant report reliability`: the reliability report as a table, JSON or CSV."""

from __future__ import annotations

import csv
import io
from typing import Any

import orjson


def fmt(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.3f}"
    return str(value)


def columns(report: dict[str, Any]) -> list[str]:
    per_k = [f"{m}{k}" for k in report["k"] for m in ("pass@", "pass^", "gap@")]
    return ["n", "c", *per_k, "consistency", "trajectory_consistency", "latency_cv", "cost_cv"]


def target_label(row: dict[str, Any]) -> str:
    return "/".join(fmt(row[k]) for k in ("service", "agent", "version"))


def table_rows(report: dict[str, Any]) -> list[dict[str, Any]]:
    rows = []
    for row in report["cases"]:
        rows.append({"target": target_label(row), "case": row["case"], **row})
    for row in report["targets"]:
        rows.append({"target": target_label(row), "case": f"(all {row['cases']} cases)", **row})
    return rows


def render(report: dict[str, Any], form: str) -> str:
    if form == "json":
        return orjson.dumps(report, option=orjson.OPT_INDENT_2).decode()
    names = ["target", "case", *columns(report)]
    rows = table_rows(report)
    if form == "csv":
        out = io.StringIO()
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(names)
        for row in rows:
            writer.writerow(["" if row[n] is None else row[n] for n in names])
        return out.getvalue().rstrip("\n")
    cells = [names] + [[fmt(row[n]) for n in names] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(names))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in cells]
    if not report["cases"]:
        lines.append("(no runs with a case id match)")
    return "\n".join(lines)
