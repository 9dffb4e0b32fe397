"""Incident replay: a run that passed under pack v1 fails under the fixed v2 (recertification)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.admin import trajectory
from tests.support.agents import refund_run
from tests.support.cli import sextant
from tests.support.refunds import V1, V2, refund_store
from tests.support.server import FAST, serve


@pytest.fixture(scope="module")
def incident(tmp_path_factory: pytest.TempPathFactory):
    """A collector evaluating under refunds v1: an incident run (refund without approval) and a
    known-good run (approved first) both pass there."""
    tmp = tmp_path_factory.mktemp("replay")
    server, bad, good = refund_store(tmp)
    yield server, bad, good, tmp
    server.stop()


def diff_rows(output: str) -> list[list[str]]:
    lines = output.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("trace "))
    rows = []
    for line in lines[start + 1 :]:
        if not line.strip():
            break
        rows.append(line.split())
    return rows


def test_the_fixed_pack_fails_the_incident_and_only_it(incident, capsys) -> None:
    server, bad, good, _ = incident
    code, out = sextant(
        capsys,
        "replay",
        "--url",
        server.admin_url,
        "--rules",
        str(V2),
        "--trace-id",
        bad,
        "--trace-id",
        good,
    )
    assert code == 0, out
    assert diff_rows(out) == [
        [bad, "refunds/approval-before-refund", "-", "->", "fail", "refund_without_approval"]
    ]
    assert "2 of 2 selected trajectories under refunds 2" in out
    assert "1 verdict changes" in out
    assert "pass -> fail: 1" in out


def test_under_the_current_pack_nothing_changes(incident, capsys) -> None:
    server, bad, _good, _ = incident
    code, out = sextant(capsys, "replay", "--url", server.admin_url, "--trace-id", bad)
    assert code == 0
    assert "under refunds 1" in out and "0 rule changes" in out


def test_expectations_set_the_exit_code(incident, capsys) -> None:
    server, bad, good, _ = incident
    base = ["replay", "--url", server.admin_url, "--rules", str(V2)]
    code, out = sextant(
        capsys, *base, "--expect", f"fail:{bad}:refund_without_approval", "--expect", f"pass:{good}"
    )
    assert code == 0, out
    assert f"expect fail:{bad}:refund_without_approval: ok" in out
    assert f"expect pass:{good}: ok" in out

    code, out = sextant(capsys, *base, "--expect", f"pass:{bad}")
    assert code == 1
    assert f"expect pass:{bad}: FAILED: verdict fail (refund_without_approval)" in out

    code, out = sextant(capsys, *base, "--expect", f"fail:{good}:refund_without_approval")
    assert code == 1 and "FAILED: verdict pass" in out

    # Under the old pack the incident does not fail: the check CI runs before the fix lands.
    code, out = sextant(
        capsys, *base[:-2], "--rules", str(V1), "--expect", f"fail:{bad}:refund_without_approval"
    )
    assert code == 1

    code, out = sextant(capsys, *base, "--expect", "fail:nothex:reason")
    assert code == 1 and "expected 32 hex digits" in out


def test_selection_flags(incident, capsys) -> None:
    server, _bad, _good, _ = incident
    base = ["replay", "--url", server.admin_url, "--rules", str(V2)]
    for flags, expected in (
        (["--target", "support-desk/support-agent"], 2),
        (["--target", "support-desk/other-agent"], 0),
        (["--verdict", "pass", "--since", "1h"], 2),
        (["--verdict", "fail"], 0),
        (["--until", "1h"], 0),
        (["--reason", "tool_outside_allow_list"], 0),
    ):
        code, out = sextant(capsys, *base, *flags)
        assert code == 0, out
        assert f"{expected} of {expected} selected trajectories" in out, (flags, out)


def test_write_adds_a_replay_revision_and_keeps_the_original(incident, capsys) -> None:
    server, bad, _good, _ = incident
    live_before = server.query_dicts(
        "SELECT trace_id, rule_id, verdict, reason, evaluated_at FROM results"
        " WHERE origin = 'live' ORDER BY ALL"
    )
    code, out = sextant(
        capsys,
        "replay",
        "--url",
        server.admin_url,
        "--rules",
        str(V2),
        "--trace-id",
        bad,
        "--write",
    )
    assert code == 0, out
    replay_id = out.split("replay ", 1)[1].split(":", 1)[0]
    stored = server.query_dicts(
        "SELECT trace_id, revision, pack_version, rule_id, verdict, reason, replay_id FROM results"
        " WHERE origin = 'replay' AND replay_id = ? ORDER BY rule_id",
        [replay_id],
    )
    assert [(r["rule_id"], r["verdict"], r["reason"]) for r in stored] == [
        ("allowed-tools", "pass", None),
        ("approval-before-refund", "fail", "refund_without_approval"),
    ]
    assert {(r["trace_id"], r["revision"], r["pack_version"]) for r in stored} == {(bad, 1, "2")}
    assert f"stored 2 results as replay {replay_id}" in out
    live_after = server.query_dicts(
        "SELECT trace_id, rule_id, verdict, reason, evaluated_at FROM results"
        " WHERE origin = 'live' ORDER BY ALL"
    )
    assert live_after == live_before
    assert trajectory(server, bad)["verdict"] == "pass"


def test_replay_from_a_stopped_collectors_file(tmp_path: Path, capsys) -> None:
    server = serve(tmp_path, {"refunds": V1}, assembler=FAST)
    bad = refund_run(server, approve=False)
    trajectory(server, bad)
    server.stop()
    db = str(tmp_path / "data" / "sextant.duckdb")
    code, out = sextant(capsys, "replay", "--db", db, "--expect", f"pass:{bad}")
    assert code == 0, out
    assert "under refunds 1" in out
    code, out = sextant(
        capsys,
        "replay",
        "--db",
        db,
        "--rules",
        str(V2),
        "--write",
        "--expect",
        f"fail:{bad}:refund_without_approval",
    )
    assert code == 0, out
    code, out = sextant(
        capsys,
        "sql",
        "SELECT origin, count(*) AS n FROM results GROUP BY origin ORDER BY origin",
        "--db",
        db,
        "--format",
        "csv",
    )
    assert out.splitlines() == ["origin,n", "live,1", "replay,2"]


def test_worker_processes_give_the_same_report(tmp_path: Path, capsys, monkeypatch) -> None:
    from collector.replay import run

    server = serve(tmp_path, {"refunds": V1}, assembler=FAST)
    runs = [refund_run(server, approve=i % 2 == 0) for i in range(4)]
    for trace_id in runs:
        trajectory(server, trace_id)
    server.stop()
    monkeypatch.setattr(run, "BATCH", 1)  # one trajectory per batch: every worker gets some
    args = ["replay", "--db", str(tmp_path / "data" / "sextant.duckdb"), "--rules", str(V2)]
    outputs = []
    for jobs in ("1", "2"):
        code, out = sextant(capsys, *args, "--jobs", jobs)
        assert code == 0, out
        outputs.append(out.split("replay ", 1)[0])
        assert "4 of 4 selected trajectories" in out and "2 verdict changes" in out
    assert outputs[0] == outputs[1]
    assert len(diff_rows(outputs[0])) == 2
