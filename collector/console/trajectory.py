"""One trajectory's page: the API's trajectory document arranged for reading — steps as a tree
and a waterfall, each rule result on the step that is its evidence, totals, the raw spans."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import duckdb
import markupsafe
import orjson

from collector.console.payload import highlight, llm_messages, retrieved
from collector.store.queries import load_trajectory, rows_as_dicts

OBJECTING = ("fail", "review")
SPANS = """
SELECT span_id, parent_span_id, name, kind, status_code, status_message, start_time,
       duration_ms, attributes
FROM spans WHERE trace_id = ? AND received_at BETWEEN ? AND ?
ORDER BY start_time_unix_nano, span_id
"""
# the decisions that cite this run as evidence: each has an evidence bundle (`sextant evidence`)
CITING = """
SELECT decision_id, arg_max(decision, seq) AS decision, arg_max(state, seq) AS state,
       max(changed_at) AS changed_at
FROM decisions WHERE list_contains(evidence_trace_ids, ?)
GROUP BY decision_id ORDER BY changed_at DESC LIMIT 20
"""


@dataclass
class StepView:
    seq: int
    depth: int
    kind: str
    name: str
    status: str
    offset: float  # where its bar starts, % of the run's wall time
    width: float  # its bar's length, % of the run's wall time
    step: dict[str, Any]  # the step as the API returns it
    arguments: markupsafe.Markup | None = None  # indented, highlighted JSON
    result: markupsafe.Markup | None = None  # highlighted when it is JSON
    messages: dict[str, Any] | None = None  # a model call's (payload.llm_messages)
    documents: list[dict[str, Any]] | None = None  # a retrieval's (payload.retrieved)
    badges: list[dict[str, Any]] = field(default_factory=list)  # results it is evidence of


@dataclass
class TrajectoryView:
    doc: dict[str, Any]  # the document GET /api/v1/trajectories/{id} returns
    steps: list[StepView]
    results: list[dict[str, Any]]  # each with `at`: the seqs of its evidence steps
    unplaced: list[dict[str, Any]]  # failing or reviewing results that cite no step
    spans: list[dict[str, Any]]
    decisions: list[dict[str, Any]]
    packs: list[str]
    verdict_why: str | None = None  # why the run's verdict differs from its rules' verdicts


def verdict_why(verdict: str | None, results: list[dict[str, Any]]) -> str | None:
    """The run's `review` next to rules that say `fail`: those rules ask only for a review
    (their pack's `on_fail: REVIEW`), which is what the run's verdict counts (overall_verdict)."""
    if verdict != "review":
        return None
    asked = [r for r in results if r["verdict"] == "fail" and r["requested_decision"] == "REVIEW"]
    if not asked:
        return None
    packs = sorted({r["pack"] for r in asked})
    rules = ", ".join(sorted({f"{r['pack']}/{r['rule_id']}" for r in asked}))
    whose = f"pack {packs[0]}'s" if len(packs) == 1 else f"packs {', '.join(packs)}'"
    return f"fail → review: {whose} on_fail is REVIEW for {rules}"


def pretty(value: Any) -> str | None:
    """JSON indented for reading; text that is not JSON stays as it is."""
    if value is None:
        return None
    if isinstance(value, str):
        try:
            value = orjson.loads(value)
        except orjson.JSONDecodeError:
            return value
    return json.dumps(value, indent=2, ensure_ascii=False, default=str)


def stored(moment: str | None) -> datetime | None:
    """A time of the document (ISO with Z) back as the store's naive UTC."""
    return datetime.fromisoformat(moment.removesuffix("Z")) if moment else None


def bars(doc: dict[str, Any], steps: list[dict[str, Any]]) -> list[tuple[float, float]]:
    """Each step's (offset, width) in % of the run, from its start and duration."""
    starts = [s["start_time_unix_nano"] for s in steps if s["start_time_unix_nano"] is not None]
    ends = [s["end_time_unix_nano"] for s in steps if s["end_time_unix_nano"] is not None]
    begin = doc.get("start_time_unix_nano") or min(starts, default=0)
    end = max([doc.get("end_time_unix_nano") or 0, *ends])
    total = max(end - begin, 1)
    placed = []
    for s in steps:
        start = s["start_time_unix_nano"] or begin
        length = max((s["end_time_unix_nano"] or start) - start, 0)
        offset = min(max((start - begin) / total * 100, 0.0), 100.0)
        placed.append(
            (round(offset, 2), round(max(min(length / total * 100, 100 - offset), 0.3), 2))
        )
    return placed


def trajectory_view(
    cursor: duckdb.DuckDBPyConnection, trace_id: str, revision: int | None
) -> TrajectoryView | None:
    doc = load_trajectory(cursor, trace_id, revision)
    if doc is None:
        return None
    steps = doc["steps_detail"]
    seq_of = {s["span_id"]: s["seq"] for s in steps}
    window = [stored(doc["first_received_at"]), stored(doc["last_received_at"])]
    cursor.execute(SPANS, [doc["trace_id"], *window])
    spans = rows_as_dicts(cursor)
    for span in spans:
        span["attributes"] = pretty(span["attributes"])
    views = []
    for s, (offset, width) in zip(steps, bars(doc, steps), strict=True):
        attributes = s["attributes"]  # the step's span's, decoded (load_trajectory)
        kind = s["kind"] or "other"
        view = StepView(
            s["seq"],
            s["depth"] or 0,
            kind,
            s["name"] or "",
            s["status"] or "",
            offset,
            width,
            s,
            highlight(s["arguments"]),
            highlight(s["result"]),
        )
        if kind == "llm":
            view.messages = llm_messages(attributes)
        elif kind == "retrieval":
            view.documents = retrieved(attributes)
        views.append(view)
    by_seq = {v.seq: v for v in views}
    unplaced = []
    for result in doc["results"]:
        result["at"] = [seq_of[i] for i in result["evidence_span_ids"] or [] if i in seq_of]
        if result["verdict"] in OBJECTING:
            for seq in result["at"]:
                by_seq[seq].badges.append(result)
            if not result["at"]:
                unplaced.append(result)
    cursor.execute(CITING, [doc["trace_id"]])
    packs = sorted({r["pack"] for r in doc["results"]})
    why = verdict_why(doc.get("verdict"), doc["results"])
    return TrajectoryView(
        doc, views, doc["results"], unplaced, spans, rows_as_dicts(cursor), packs, why
    )
