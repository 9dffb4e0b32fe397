"""Datasets in the store: the cases of one, every dataset, and the rows that add runs to one.

Everything reads through a `Source` (a running collector, a DuckDB file, a Parquet export, or
the service's own cursor), so the command line and the service share it; rows are written by
whoever holds the writer."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import pyarrow as pa

from collector.datasets.cases import Case, case_from_row, case_row, check_expect, check_name
from collector.errors import SextantError
from collector.replay.cases import trajectory_doc
from collector.replay.selection import check_trace_id, decision_traces
from collector.store.runs import Source
from collector.store.tables import rows_table

# A case is the latest row of its (dataset, trace): adding a run again replaces its case.
CASES = """
SELECT * FROM dataset_cases WHERE dataset = ?
QUALIFY row_number() OVER (PARTITION BY trace_id ORDER BY added_at DESC) = 1
ORDER BY added_at, trace_id
"""
DATASETS = """
SELECT dataset, count(*) AS cases,
       count(*) FILTER (WHERE expect = 'pass') AS expect_pass,
       count(*) FILTER (WHERE expect = 'fail') AS expect_fail,
       count(*) FILTER (WHERE expect IS NULL) AS as_labelled,
       min(added_at) AS created_at, max(added_at) AS changed_at,
       arg_max(added_by, added_at) AS last_added_by
FROM (SELECT * FROM dataset_cases
      QUALIFY row_number() OVER (PARTITION BY dataset, trace_id ORDER BY added_at DESC) = 1)
GROUP BY dataset ORDER BY dataset
"""
# The reviewers' labels on one revision of a run (the latest per pack and rule wins).
LABELS = """
SELECT pack, pack_version, rule_id, verdict, reason, reviewer, message, evaluated_at
FROM results
WHERE trace_id = ? AND revision = ? AND origin = 'live' AND scope = 'trajectory'
      AND source = 'human'
QUALIFY row_number() OVER (PARTITION BY pack, rule_id ORDER BY evaluated_at DESC) = 1
ORDER BY pack, rule_id
"""


def load_cases(source: Source, name: str) -> list[Case]:
    """The dataset's cases, oldest first; an error when there is no such dataset."""
    rows = source.query(CASES, [check_name(name)]).to_pylist()
    if not rows:
        raise SextantError(f"no dataset {name!r} in {source.name}")
    return [case_from_row(row) for row in rows]


def list_datasets(source: Source) -> list[dict[str, Any]]:
    """Each dataset: its cases, how many expect what, when it was made and last changed."""
    return source.query(DATASETS).to_pylist()


def has_dataset(source: Source, name: str) -> bool:
    found = source.query("SELECT count(*) AS n FROM dataset_cases WHERE dataset = ?", [name])
    return bool(found["n"][0].as_py())


def labels_of(source: Source, trace_id: str, revision: int) -> list[dict[str, Any]]:
    rows = source.query(LABELS, [trace_id, revision]).to_pylist()
    for row in rows:
        row["evaluated_at"] = row["evaluated_at"].isoformat() + "Z"
    return rows


def new_cases(
    source: Source,
    name: str,
    trace_ids: list[str],
    expect: str | None,
    by: str,
    now: datetime,
    note: str | None = None,
    unless_labelled: bool = False,
) -> pa.Table:
    """The rows that add these runs (their current revision, with their labels) to `name`;
    with `unless_labelled`, a run reviewers labelled expects their labels instead of `expect`."""
    check_name(name)
    check_expect(expect)
    if not by.strip():
        raise SextantError("say who adds the runs (by)")
    if not trace_ids:
        raise SextantError("give at least one trace id")
    rows = []
    for trace_id in dict.fromkeys(check_trace_id(t) for t in trace_ids):
        doc = trajectory_doc(source, trace_id)
        labels = labels_of(source, trace_id, doc["revision"])
        wanted = None if unless_labelled and labels else expect
        rows.append(case_row(name, doc, labels, wanted, by.strip(), now, note))
    return rows_table("dataset_cases", rows)


def evidence_cases(
    source: Source,
    name: str,
    decision_id: str,
    expect: str | None,
    by: str,
    now: datetime,
    unless_labelled: bool = False,
) -> pa.Table:
    """The rows that add every run a decision cited as evidence, still stored, to `name`."""
    cited = decision_traces(source, decision_id)
    if not cited:
        raise SextantError(f"decision {decision_id} cites no runs as evidence")
    stored = source.query(
        "SELECT trace_id FROM trajectories WHERE is_current AND trace_id IN ?", [cited]
    )["trace_id"].to_pylist()
    if not stored:
        raise SextantError(
            f"none of the {len(cited)} runs decision {decision_id} cites is stored any more"
        )
    note = f"evidence of decision {decision_id}"
    kept = [t for t in cited if t in set(stored)]
    return new_cases(source, name, kept, expect, by, now, note, unless_labelled)
