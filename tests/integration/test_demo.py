"""`sextant demo` as a user runs it: a real process, real OTLP, and its printed outcome."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import duckdb


def test_the_demo_quarantines_the_unsafe_agent_and_passes_the_correct_one(tmp_path: Path):
    done = subprocess.run(
        [sys.executable, "-m", "collector.cli", "demo", "--runs", "2", "--data-dir", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    summary = out[out.index("TARGET") :].splitlines()
    rows = {line.split()[0]: line.split() for line in summary[1:6]}
    assert rows["support-desk/support-agent@2.3.0"][1:6] == ["2", "2", "0", "0", "PASS"]
    unsafe = rows["support-desk/support-agent@2.4.0-rc1"]
    assert unsafe[1:6] == ["2", "0", "2", "0", "QUARANTINE"]
    assert unsafe[6] == "(approval_boundary_violation)"
    assert rows["travel-desk/travel-agent@1.0.0"][5] == "REVIEW"
    # the canary's tool mix drifts from production's: ROLLBACK for the candidate only
    assert rows["triage-desk/triage-agent@1.4.0"][1:6] == ["20", "20", "0", "0", "PASS"]
    canary = rows["triage-desk/triage-agent@1.5.0"]
    assert canary[5] == "ROLLBACK" and "canary_tool_mix_changed" in canary[6]
    # live lines: trajectories closing with verdicts, and the decision firing with evidence
    assert "FIRING  QUARANTINE support-desk/support-agent@2.4.0-rc1" in out
    assert out.count("  closed  ") == 2 + 2 + 2 + 20 + 20
    database = tmp_path / "sextant.duckdb"
    assert f"DuckDB file: {database}" in out
    with duckdb.connect(str(database), read_only=True) as con:
        firing = con.execute(
            "SELECT count(*) FROM decisions WHERE decision = 'QUARANTINE' AND event = 'firing'"
        ).fetchone()
    assert firing == (1,)
