"""A dataset case, and what it expects of a pack (pure: no store, no clock).

A case holds the run as `sextant rules test` cases hold it (the trajectory document with the
results it got live), the reviewers' labels on it, and optionally the pack verdict it must get.
What it expects of a pack, most specific first: that verdict (`expect`) with the labelled rules'
verdicts; else the labels alone; else what the pack said live when the case was added."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import orjson

from collector.errors import SextantError
from collector.replay.cases import expectation, expected_run

EXPECTATIONS = ("pass", "fail")
NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")


def check_name(name: str) -> str:
    if not isinstance(name, str) or not NAME.match(name):
        raise SextantError(
            f"dataset name {name!r}: use 1 to 128 letters, digits, '.', '_' or '-',"
            " starting with a letter or digit"
        )
    return name


def check_expect(expect: str | None) -> str | None:
    if expect is not None and expect not in EXPECTATIONS:
        raise SextantError(f"expect {expect!r}: use pass or fail (or nothing: as labelled)")
    return expect


@dataclass(frozen=True)
class Case:
    dataset: str
    trace_id: str
    revision: int
    trajectory: dict[str, Any]
    expect: str | None
    labels: list[dict[str, Any]]
    added_by: str
    added_at: datetime
    note: str | None = None

    def labelled(self, pack: str) -> dict[str, str]:
        """The verdict a reviewer gave each rule of `pack` on this run."""
        return {lab["rule_id"]: lab["verdict"] for lab in self.labels if lab["pack"] == pack}

    def judged_by(self) -> list[str]:
        """The packs whose live results the case holds."""
        return sorted({r["pack"] for r in own_results(self.trajectory)})


def own_results(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """The run's results from the rules' own evaluators (a reviewer's label is not one)."""
    return [r for r in doc.get("results", []) if r.get("source") is None]


def case_row(
    dataset: str,
    doc: dict[str, Any],
    labels: list[dict[str, Any]],
    expect: str | None,
    by: str,
    now: datetime,
    note: str | None = None,
) -> dict[str, Any]:
    """The `dataset_cases` row that adds the run `doc` to `dataset`."""
    return {
        "dataset": check_name(dataset),
        "trace_id": doc["trace_id"],
        "revision": doc["revision"],
        "service_name": doc.get("service_name"),
        "agent_name": doc.get("agent_name"),
        "service_version": doc.get("service_version"),
        "trajectory": orjson.dumps(doc).decode(),
        "expect": check_expect(expect),
        "labels": orjson.dumps(labels).decode(),
        "added_by": by,
        "added_at": now,
        "note": note or None,
    }


def case_from_row(row: dict[str, Any]) -> Case:
    """A case as `dataset_cases` holds it (JSON columns as text or as values)."""

    def value(v: Any) -> Any:
        return orjson.loads(v) if isinstance(v, str | bytes) else v

    return Case(
        dataset=row["dataset"],
        trace_id=row["trace_id"],
        revision=row["revision"],
        trajectory=value(row["trajectory"]),
        expect=row["expect"],
        labels=value(row["labels"]) or [],
        added_by=row["added_by"],
        added_at=row["added_at"],
        note=row.get("note"),
    )


def expectation_for(case: Case, pack: str) -> dict[str, Any] | None:
    """What the case expects of `pack` (a `rules test` case's `expect`); None when it expects
    nothing of it: no expected verdict, no labels of its rules, and not judged by it live."""
    run = expected_run(case.trajectory)
    labelled = case.labelled(pack)
    if case.expect is not None:
        return {"verdict": case.expect, "rules": labelled, **run}
    if labelled:
        return {"rules": labelled, **run}
    live = [r for r in own_results(case.trajectory) if r["pack"] == pack]
    if not live:
        return None
    return {**expectation(live), **run}


def as_test_case(case: Case, pack: str) -> dict[str, Any]:
    """The case as a `sextant rules test` case of `pack`; an error when it expects nothing of
    that pack."""
    expect = expectation_for(case, pack)
    if expect is None:
        judged = ", ".join(case.judged_by()) or "no pack"
        raise SextantError(
            f"dataset {case.dataset}, trace {case.trace_id}: no expectation for pack {pack!r}"
            f" (judged live by {judged}, no labels of it); add it again with --expect pass|fail"
        )
    return {**case.trajectory, "expect": expect}
