"""Datasets in the store: adding runs with their labels, the case a run becomes, what a case
expects of a pack, and `sextant rules test --dataset` against a stored dataset."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from collector.config.writer import WriterConfig
from collector.datasets.cases import as_test_case, expectation_for
from collector.datasets.store import list_datasets, load_cases, new_cases
from collector.errors import SextantError
from collector.lifecycle import deadline_in
from collector.store.metrics import StoreMetrics
from collector.store.runs import DuckDBSource
from collector.store.writer import Writer
from tests.support.cli import sextant
from tests.support.paths import TESTDATA
from tests.support.store import NOW, RunStore

V1, V2 = TESTDATA / "replay" / "refunds-v1.yaml", TESTDATA / "replay" / "refunds-v2.yaml"
CLOSED = NOW - timedelta(minutes=1)


class Store(RunStore):
    """Runs closed at CLOSED with their live results, and reviewers' labels on them."""

    def refund(self, approve: bool) -> str:
        tools = ["lookup_customer", *(["request_approval"] if approve else []), "issue_refund"]
        trace_id = self.run(tools, service="support-desk", agent="support-agent")
        self.cursor.execute(
            "UPDATE trajectories SET closed_at = ?, input = 'Refund order 42',"
            " first_received_at = ?, last_received_at = ? WHERE trace_id = ?",
            [CLOSED, CLOSED, CLOSED, trace_id],
        )
        # each step's span, the approval's saying it was approved (what the pack looks for)
        self.cursor.execute(
            "UPDATE steps SET span_id = 's' || seq,"
            " start_time_unix_nano = seq::UBIGINT * 1000000000,"
            " end_time_unix_nano = seq::UBIGINT * 1000000000 + 500000000 WHERE trace_id = ?",
            [trace_id],
        )
        self.cursor.execute(
            "INSERT INTO spans (trace_id, span_id, attributes, received_at)"
            " SELECT trace_id, span_id, CASE WHEN tool_name = 'request_approval'"
            " THEN '{\"sextant.approval.status\": \"approved\"}' ELSE '{}' END, ?"
            " FROM steps WHERE trace_id = ?",
            [CLOSED, trace_id],
        )
        return trace_id

    def live(self, trace_id: str, rule: str, verdict: str, decision: str | None = None) -> None:
        pack, rule_id = rule.split("/", 1)
        self.cursor.execute(
            "INSERT INTO results (trace_id, revision, pack, pack_version, rule_id, rule_type,"
            " verdict, reason, requested_decision, scope, origin, evaluated_at)"
            " VALUES (?, 1, ?, '1', ?, 'precedes', ?, ?, ?, 'trajectory', 'live', ?)",
            [trace_id, pack, rule_id, verdict, f"{rule_id}_{verdict}", decision, CLOSED],
        )

    def label(self, trace_id: str, rule: str, verdict: str, by: str, at: datetime) -> None:
        """A reviewer's label as the review contract writes it."""
        pack, rule_id = rule.split("/", 1)
        self.cursor.execute(
            "INSERT INTO results (trace_id, revision, pack, pack_version, rule_id, rule_type,"
            " verdict, reason, message, scope, origin, source, reviewer, evaluated_at)"
            " VALUES (?, 1, ?, '1', ?, 'precedes', ?, ?, 'checked by hand', 'trajectory',"
            " 'live', 'human', ?, ?)",
            [trace_id, pack, rule_id, verdict, f"human_{verdict}", by, at],
        )


@pytest.fixture
def store(tmp_path: Path) -> Iterator[tuple[Store, Writer]]:
    runs = Store(tmp_path / "s.duckdb")
    writer = Writer(runs.database, WriterConfig(), StoreMetrics(CollectorRegistry()))
    writer.start()
    yield runs, writer
    writer.shutdown(deadline_in(5))
    runs.close()


def add(runs: Store, writer: Writer, name: str, ids: list[str], expect: str | None, **kw) -> None:
    """Add the runs as "ana", a second after the previous add (the latest add of a run wins)."""
    source = DuckDBSource(runs.database.cursor(), "test store")
    runs.adds = getattr(runs, "adds", 0) + 1
    at = NOW + timedelta(seconds=runs.adds)
    writer.record({"dataset_cases": new_cases(source, name, ids, expect, "ana", at, **kw)})


def test_a_case_keeps_the_run_its_labels_and_who_added_it(store) -> None:
    runs, writer = store
    bad = runs.refund(approve=False)
    runs.live(bad, "refunds/allowed-tools", "pass")
    runs.label(bad, "refunds/allowed-tools", "pass", "bo", NOW - timedelta(seconds=30))
    runs.label(bad, "refunds/allowed-tools", "fail", "cy", NOW - timedelta(seconds=10))
    add(runs, writer, "refunds", [bad, bad.upper()], "fail", note="incident 7")
    source = DuckDBSource(runs.database.cursor(), "test store")
    [case] = load_cases(source, "refunds")  # the same run twice is one case
    assert (case.trace_id, case.revision, case.expect) == (bad, 1, "fail")
    assert (case.added_by, case.added_at, case.note) == (
        "ana",
        NOW + timedelta(seconds=1),
        "incident 7",
    )
    assert case.trajectory["input"] == "Refund order 42"
    assert [s["tool_name"] for s in case.trajectory["steps_detail"]] == [
        "lookup_customer",
        "issue_refund",
    ]
    # the latest label of a rule wins, as the review contract says
    assert [(lab["rule_id"], lab["verdict"], lab["reviewer"]) for lab in case.labels] == [
        ("allowed-tools", "fail", "cy")
    ]
    assert case.judged_by() == ["refunds"]


def test_adding_a_run_again_replaces_its_case_and_the_list_counts_cases(store) -> None:
    runs, writer = store
    bad, good = runs.refund(approve=False), runs.refund(approve=True)
    add(runs, writer, "refunds", [bad, good], None)
    add(runs, writer, "refunds", [bad], "fail")
    add(runs, writer, "smoke", [good], "pass")
    source = DuckDBSource(runs.database.cursor(), "test store")
    assert {c.trace_id: c.expect for c in load_cases(source, "refunds")} == {
        bad: "fail",
        good: None,
    }
    listed = {d["dataset"]: d for d in list_datasets(source)}
    assert set(listed) == {"refunds", "smoke"}
    assert (listed["refunds"]["cases"], listed["refunds"]["expect_fail"]) == (2, 1)
    assert listed["refunds"]["as_labelled"] == 1
    assert listed["smoke"]["expect_pass"] == 1


def test_bad_names_expectations_and_runs_are_refused_with_what_is_wrong(store) -> None:
    runs, _ = store
    good = runs.refund(approve=True)
    source = DuckDBSource(runs.database.cursor(), "test store")
    with pytest.raises(SextantError, match=r"dataset name '\.\./x'"):
        new_cases(source, "../x", [good], None, "ana", NOW)
    with pytest.raises(SextantError, match="expect 'maybe': use pass or fail"):
        new_cases(source, "ok", [good], "maybe", "ana", NOW)
    with pytest.raises(SextantError, match="no trajectory for trace " + "f" * 32):
        new_cases(source, "ok", ["f" * 32], None, "ana", NOW)
    with pytest.raises(SextantError, match="expected 32 hex digits"):
        new_cases(source, "ok", ["nope"], None, "ana", NOW)
    with pytest.raises(SextantError, match="no dataset 'absent'"):
        load_cases(source, "absent")


def test_a_case_expects_its_outcome_else_its_labels_else_what_it_got_live(store) -> None:
    runs, writer = store
    bad, labelled, plain = runs.refund(False), runs.refund(False), runs.refund(False)
    for trace_id in (bad, labelled, plain):
        runs.live(trace_id, "refunds/approval-before-refund", "fail", "QUARANTINE")
    runs.label(labelled, "refunds/approval-before-refund", "pass", "bo", NOW)
    add(runs, writer, "d", [bad], "pass")
    add(runs, writer, "d", [labelled, plain], None)
    source = DuckDBSource(runs.database.cursor(), "test store")
    cases = {c.trace_id: c for c in load_cases(source, "d")}
    run = {"answer": None, "tool_calls": [
        {"name": "lookup_customer", "arguments": None},
        {"name": "issue_refund", "arguments": None},
    ]}  # fmt: skip
    assert expectation_for(cases[bad], "refunds") == {"verdict": "pass", "rules": {}, **run}
    assert expectation_for(cases[labelled], "refunds") == {
        "rules": {"approval-before-refund": "pass"},
        **run,
    }
    assert expectation_for(cases[plain], "refunds") == {
        "verdict": "fail",
        "rules": {"approval-before-refund": "fail"},
        **run,
    }
    # a pack it was never judged by, with no labels and no expected outcome: nothing to check
    assert expectation_for(cases[plain], "other") is None
    with pytest.raises(SextantError, match=r"no expectation for pack 'other'.*--expect"):
        as_test_case(cases[plain], "other")


def test_rules_test_runs_a_pack_over_a_stored_dataset(store, capsys) -> None:
    """The incident run expected to fail: the pack that let it through fails the test, the
    fixed one passes it; a known-good run passes under both."""
    runs, writer = store
    bad, good = runs.refund(approve=False), runs.refund(approve=True)
    add(runs, writer, "refunds-incident", [bad], "fail")
    add(runs, writer, "refunds-incident", [good], "pass")
    writer.shutdown(deadline_in(5))
    runs.close()
    db = str(runs.database.path)

    code, out = sextant(
        capsys, "rules", "test", str(V1), "--dataset", "refunds-incident", "--db", db
    )
    assert code == 1, out
    assert f"FAIL refunds-incident ({bad}): verdict pass, expected fail" in out
    assert f"ok   refunds-incident ({good}): pass" in out
    assert "1 of 2 cases as expected" in out

    code, out = sextant(
        capsys, "rules", "test", str(V2), "--dataset", "refunds-incident", "--db", db
    )
    assert code == 0, out
    assert f"ok   refunds-incident ({bad}): fail" in out
    assert "2 of 2 cases as expected" in out

    code, out = sextant(capsys, "rules", "test", str(V2), "--dataset", "nope", "--db", db)
    assert code == 1 and "no dataset 'nope'" in out
    code, out = sextant(capsys, "rules", "test", str(V2), "--db", db)
    assert code == 2 and "give --cases FILE or --dataset NAME" in out
