"""Repeated runs of several cases: `sextant report reliability` and the reliability rule."""

from __future__ import annotations

import csv
import io
import json
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest

from tests.support.drift import send_runs, serve_pack
from tests.support.wait import wait_for

PACK = """
name: booking
version: "1.0.0"
owner: travel-oncall
selector: {service: travel-desk}
rules:
  - id: verified
    type: presence
    step: {kind: tool, name: verify_booking}
    reason: booking_not_verified
    on_fail: FAIL
  - id: reliable-every-time
    type: reliability
    interval: 0.5s
    metric: pass_hat_k
    k: 3
    min: 0.9
    reason: unreliable_agent
    on_fail: DOWNGRADE
"""
OK = ["search_flights", "verify_booking"]
BAD = ["search_flights"]
# case -> attempts (pass or not): n and c per case
CASES = {"lis-osl": [OK] * 4, "lis-ber": [OK, BAD, OK, BAD], "lis-mad": [BAD, OK, BAD]}


def report(*args: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "collector.cli", "report", "reliability", *args],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_reliability_report_and_rule(tmp_path: Path) -> None:
    server = serve_pack(tmp_path, "booking", PACK)
    try:
        tools, cases = [], []
        for case, attempts in CASES.items():
            tools += attempts
            cases += [case] * len(attempts)
        sent = send_runs(server.grpc_endpoint, "travel-desk", "2.0.0", tools, cases)
        failed = {t for t, calls in zip(sent, tools, strict=True) if calls == BAD}
        wait_for(lambda: server.query("SELECT count(*) FROM trajectories")[0][0] == len(sent))
        stored = datetime.now(UTC).replace(tzinfo=None)

        found = json.loads(report("--url", server.admin_url, "--k", "1,3,5", "--format", "json"))
        rows = {r["case"]: r for r in found["cases"]}
        assert {c: (r["n"], r["c"]) for c, r in rows.items()} == {
            "lis-osl": (4, 4),
            "lis-ber": (4, 2),
            "lis-mad": (3, 1),
        }
        assert rows["lis-ber"]["pass@1"] == pytest.approx(0.5)
        assert rows["lis-ber"]["pass@3"] == pytest.approx(1.0)  # only 2 failures: 3 draws pass
        assert rows["lis-ber"]["pass^3"] == pytest.approx(0.0)
        assert rows["lis-mad"]["pass@1"] == pytest.approx(1 / 3)
        assert rows["lis-osl"]["pass^3"] == pytest.approx(1.0)
        assert rows["lis-osl"]["pass@5"] is None  # 4 attempts: underpowered for k = 5
        assert rows["lis-ber"]["gap@3"] == pytest.approx(1.0)
        assert rows["lis-ber"]["consistency"] == pytest.approx(0.5)
        assert rows["lis-mad"]["consistency"] == pytest.approx(2 / 3)
        assert rows["lis-ber"]["trajectory_consistency"] == pytest.approx(0.5)
        assert rows["lis-osl"]["trajectory_consistency"] == pytest.approx(1.0)
        [target] = found["targets"]
        assert (target["cases"], target["n"], target["c"]) == (3, 11, 7)
        assert target["pass@1"] == pytest.approx((1 + 0.5 + 1 / 3) / 3)
        assert target["pass^3"] == pytest.approx((1 + 0 + 0) / 3)

        table = report("--url", server.admin_url, "--k", "3", "--target", "travel-desk/*/2.*")
        lines = table.splitlines()
        assert lines[0].split()[:5] == ["target", "case", "n", "c", "pass@3"]
        ber = next(line for line in lines if "lis-ber" in line).split()
        assert ber[:7] == [
            "travel-desk/travel-agent/2.0.0",
            "lis-ber",
            "4",
            "2",
            "1.000",
            "0.000",
            "1.000",
        ]
        assert any("(all 3 cases)" in line for line in lines)
        none = report("--url", server.admin_url, "--target", "other-service")
        assert "(no runs with a case id match)" in none

        def rule_result():
            return server.query_dicts(
                "SELECT * FROM results WHERE scope = 'window' AND evaluated_at > ?"
                " ORDER BY evaluated_at DESC LIMIT 1",
                [stored],
            )

        [result] = wait_for(rule_result, timeout=30)
        assert (result["verdict"], result["reason"]) == ("fail", "unreliable_agent")
        assert result["requested_decision"] == "DOWNGRADE"
        assert result["metric"] == "pass_hat_k@3" and result["score"] == pytest.approx(1 / 3)
        assert result["current_n"] == 3
        assert result["evidence_trace_ids"] and set(result["evidence_trace_ids"]) <= failed
        labels = {
            "pack": "booking",
            "rule": "reliable-every-time",
            "service": "travel-desk",
            "agent": "travel-agent",
            "version": "2.0.0",
            "k": "3",
        }
        assert server.metric("sextant_reliability_pass_hat_k", labels) == pytest.approx(1 / 3)
        assert server.metric("sextant_reliability_pass_at_k", labels) == pytest.approx(1.0)
    finally:
        server.stop()

    db = tmp_path / "data" / "sextant.duckdb"
    text = report("--db", str(db), "--k", "1", "--format", "csv")
    parsed = list(csv.DictReader(io.StringIO(text)))
    assert [r["case"] for r in parsed] == ["lis-ber", "lis-mad", "lis-osl", "(all 3 cases)"]
    assert parsed[0]["pass@1"] == "0.5"

    saved = subprocess.run(
        [
            sys.executable,
            "-m",
            "collector.cli",
            "baseline",
            "save",
            "before-2.1",
            "--db",
            str(db),
            "--target",
            "travel-desk/travel-agent/2.0.0",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert saved.returncode == 0, saved.stderr
    assert "baseline before-2.1 saved: 11 runs" in saved.stdout
