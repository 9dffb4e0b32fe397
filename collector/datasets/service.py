"""Datasets as the running service reads and adds to them (the API and the console share it)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

import duckdb

from collector.datasets.store import evidence_cases, list_datasets, load_cases, new_cases
from collector.store.database import Database
from collector.store.runs import DuckDBSource
from collector.store.writer import Writer


def source_of(cursor: duckdb.DuckDBPyConnection) -> DuckDBSource:
    return DuckDBSource(cursor, "the collector's store")


def summary(case: Any) -> dict[str, Any]:
    """A case as listed: where it came from, what it expects, who added it (not the run)."""
    t = case.trajectory
    return {
        "trace_id": case.trace_id,
        "revision": case.revision,
        "service_name": t.get("service_name"),
        "agent_name": t.get("agent_name"),
        "service_version": t.get("service_version"),
        "verdict": t.get("verdict"),
        "input": t.get("input"),
        "expect": case.expect,
        "labels": case.labels,
        "judged_by": case.judged_by(),
        "added_by": case.added_by,
        "added_at": case.added_at.isoformat() + "Z",
        "note": case.note,
    }


class Datasets:
    def __init__(self, database: Database, writer: Writer, now: Callable[[], datetime]) -> None:
        self.database = database
        self.writer = writer
        self.now = now

    def add(
        self,
        name: str,
        by: str,
        expect: str | None,
        trace_ids: list[str] | None = None,
        decision: str | None = None,
        note: str | None = None,
    ) -> list[str]:
        """Add runs (or every run a decision cites) to `name`, stored before it returns; the
        trace ids added."""

        def build(cursor: duckdb.DuckDBPyConnection) -> Any:
            source, now = source_of(cursor), self.now()
            if decision:
                return evidence_cases(source, name, decision, expect, by, now)
            return new_cases(source, name, trace_ids or [], expect, by, now, note)

        rows = self.database.read(build)
        self.writer.record({"dataset_cases": rows})
        return list(rows["trace_id"].to_pylist())

    def listed(self) -> list[dict[str, Any]]:
        rows = self.database.read(lambda c: list_datasets(source_of(c)))
        for row in rows:
            for key in ("created_at", "changed_at"):
                row[key] = row[key].isoformat() + "Z"
        return rows

    def cases(self, name: str) -> list[dict[str, Any]]:
        """The dataset's cases as listed; SextantError when there is no such dataset."""
        return [summary(c) for c in self.database.read(lambda c: load_cases(source_of(c), name))]
