"""Regression cases for `sextant rules test`, decision evidence bundles, --decision selection."""

from __future__ import annotations

import hashlib
import zipfile
from datetime import datetime
from pathlib import Path

import orjson
import pyarrow as pa
import pytest

from collector.store.tables import ARROW_SCHEMAS
from tests.support.cli import sextant
from tests.support.refunds import V1, V2, refund_store


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory):
    tmp = tmp_path_factory.mktemp("cases")
    server, bad, good = refund_store(tmp)
    yield server, bad, good, tmp
    server.stop()


def decision(decision_id: str, seq: int, state: str, traces: list[str]) -> dict:
    return {
        "decision_id": decision_id,
        "seq": seq,
        "event": state,
        "state": state,
        "decision": "QUARANTINE",
        "service_name": "support-desk",
        "agent_name": "support-agent",
        "service_version": "2.3.1",
        "policy": "refunds",
        "reasons": ["refund_without_approval"],
        "owner": "payments-oncall",
        "rules": ["refunds/approval-before-refund"],
        "packs": ["refunds@1"],
        "evidence_trace_ids": traces,
        "summary": "refunds without approval",
        "active_at": datetime(2025, 6, 1, 12, 0),
        "fired_at": datetime(2025, 6, 1, 12, 5) if state == "firing" else None,
        "resolved_at": None,
        "actor": None,
        "note": None,
        "changed_at": datetime(2025, 6, 1, 12, seq),
    }


def add_decision(server, decision_id: str, traces: list[str]) -> None:  # type: ignore[no-untyped-def]
    rows = [decision(decision_id, 1, "pending", traces), decision(decision_id, 2, "firing", traces)]
    table = pa.Table.from_pylist(rows, schema=ARROW_SCHEMAS["decisions"])
    server.pipeline.writer.submit_tables({"decisions": table}).result(10)


def test_exported_cases_pass_rules_test_and_catch_the_fix(store, tmp_path: Path, capsys) -> None:
    server, bad, good, _ = store
    cases = tmp_path / "incident.jsonl"
    code, out = sextant(
        capsys, "export", "case", bad, good, "--out", str(cases), "--url", server.admin_url
    )
    assert code == 0, out
    docs = [orjson.loads(line) for line in cases.read_text().splitlines()]
    assert [d["trace_id"] for d in docs] == [bad, good]
    assert docs[0]["expect"] == {
        "verdict": "pass",
        "rules": {"allowed-tools": "pass"},
        # what the run answered and called, for people to edit into what it should have done
        "answer": "Refunded.",
        "tool_calls": [
            {"name": "lookup_customer", "arguments": {"order": 42}},
            {"name": "issue_refund", "arguments": {"order": 42, "amount": 120}},
        ],
    }
    code, out = sextant(capsys, "rules", "test", str(V1), "--cases", str(cases))
    assert code == 0 and "2 of 2 cases as expected" in out
    # The fixed pack no longer agrees on the incident: the case shows the regression.
    code, out = sextant(capsys, "rules", "test", str(V2), "--cases", str(cases))
    assert code == 1 and "1 of 2 cases as expected" in out


def test_decision_selection_view_and_evidence_bundle(store, tmp_path: Path, capsys) -> None:
    server, bad, _, _ = store
    add_decision(server, "dec-refunds-1", [bad])
    current = server.query("SELECT decision_id, seq, state FROM current_decisions")
    assert current == [("dec-refunds-1", 2, "firing")]

    code, out = sextant(
        capsys, "replay", "--url", server.admin_url, "--decision", "dec-refunds-1",
        "--rules", str(V2), "--expect", f"fail:{bad}:refund_without_approval",
    )  # fmt: skip
    assert code == 0, out
    assert "1 of 1 selected trajectories" in out
    code, out = sextant(capsys, "replay", "--url", server.admin_url, "--decision", "nope")
    assert code == 1 and "no decision 'nope'" in out

    bundle = tmp_path / "evidence.zip"
    code, out = sextant(
        capsys, "evidence", "dec-refunds-1", "--out", str(bundle), "--url", server.admin_url
    )
    assert code == 0, out
    with zipfile.ZipFile(bundle) as archive:
        names = set(archive.namelist())
        manifest = orjson.loads(archive.read("manifest.json"))
        assert names == {
            "manifest.json",
            "decision.json",
            "history.jsonl",
            "packs/refunds@1.yaml",
            "results.jsonl",
            f"trajectories/{bad}.json",
            f"spans/{bad}.jsonl",
        }
        for name, digest in manifest["files"].items():
            assert hashlib.sha256(archive.read(name)).hexdigest() == digest
        assert set(manifest["files"]) == names - {"manifest.json"}
        assert orjson.loads(archive.read("decision.json"))["state"] == "firing"
        assert len(archive.read("history.jsonl").splitlines()) == 2
        assert archive.read("packs/refunds@1.yaml").decode() == V1.read_text()
        spans = [orjson.loads(x) for x in archive.read(f"spans/{bad}.jsonl").splitlines()]
        assert (
            len(spans) == server.query("SELECT count(*) FROM spans WHERE trace_id = ?", [bad])[0][0]
        )
        results = [orjson.loads(x) for x in archive.read("results.jsonl").splitlines()]
        assert {r["trace_id"] for r in results} == {bad}
