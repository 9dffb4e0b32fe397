"""The command line as one surface, as a user checks it: --version, --help, the exit codes,
`sextant trajectories` with pages, and --format on the commands that print data."""

from __future__ import annotations

import csv
import io
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import requests

from collector.config.sections import BUILTIN_RULES
from tests.support.admin import trajectory
from tests.support.agents import refund_run
from tests.support.cli import sextant
from tests.support.refunds import V2
from tests.support.server import FAST, start_server

HEAVY = ("duckdb", "grpc", "scipy", "pyarrow", "aiohttp", "prometheus_client")


@pytest.fixture(scope="module")
def two_packs(tmp_path_factory: pytest.TempPathFactory):
    """A collector under the built-in default pack and refunds v2: the incident run fails
    refunds (and passes default), the approved run passes both."""
    tmp = tmp_path_factory.mktemp("surface")
    rules = tmp / "rules"
    rules.mkdir()
    shutil.copy(V2, rules / "refunds.yaml")
    shutil.copy(BUILTIN_RULES / "default.yaml", rules / "default.yaml")
    server = start_server(tmp / "data", assembler=FAST, rules={"paths": [str(rules)]})
    bad = refund_run(server, approve=False)
    assert trajectory(server, bad)["verdict"] == "fail"
    good = refund_run(server, approve=True)  # closed after `bad`: the newer of the two
    assert trajectory(server, good)["verdict"] == "pass"
    yield server, bad, good, tmp
    server.stop()


def test_version_and_every_help_shows_an_example_and_the_defaults(capsys) -> None:
    code, out = sextant(capsys, "--version")
    assert (code, out.strip()) == (0, "sextant 0.1.0")
    code, out = sextant(capsys, "--help")
    assert code == 0
    assert "exit codes:" in out and "3    cannot reach the collector" in out
    for command in (
        ["serve"],
        ["bench"],
        ["show"],
        ["trajectories"],
        ["rules", "test"],
        ["sql"],
        ["replay"],
        ["export", "case"],
        ["evidence"],
        ["decisions"],
        ["alerts", "test"],
        ["alerts", "sink"],
        ["report", "reliability"],
        ["demo"],
    ):
        code, out = sextant(capsys, *command, "--help")
        assert code == 0, command
        assert "example:\n  sextant " + command[0] in out, command
    code, out = sextant(capsys, "trajectories", "--help")
    out = " ".join(out.split())  # as wrapped for any terminal width
    assert (
        "--url URL" in out and "(default: $SEXTANT_URL when set, else http://localhost:9464)" in out
    )
    assert "$SEXTANT_TOKEN" in out and "--format {table,json,csv}" in out
    assert "(default: 50)" in out


def test_the_api_lists_trajectories_with_the_same_filters_and_pages(two_packs) -> None:
    server, bad, good, _tmp = two_packs
    api = f"{server.admin_url}/api/v1/trajectories"
    failed = requests.get(api, params={"verdict": "fail", "since": "1h"}, timeout=10).json()
    assert [t["trace_id"] for t in failed["trajectories"]] == [bad]
    assert "next_cursor" not in failed  # the last page says so by having none
    reason = {"reason": "refund_without_approval"}
    assert [t["trace_id"] for t in requests.get(api, params=reason, timeout=10).json()[
        "trajectories"]] == [bad]  # fmt: skip
    first = requests.get(api, params={"limit": 1}, timeout=10).json()
    assert [t["trace_id"] for t in first["trajectories"]] == [good]
    second = requests.get(api, params={"limit": 1, "cursor": first["next_cursor"]}, timeout=10)
    assert [t["trace_id"] for t in second.json()["trajectories"]] == [bad]
    forged = requests.get(api, params={"cursor": "not-a-cursor"}, timeout=10)
    assert forged.status_code == 400 and "cursor" in forged.json()["error"]


def test_help_imports_no_heavy_library() -> None:
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "collector.cli", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0
    imported = {line.split("|")[-1].strip() for line in done.stderr.splitlines() if "|" in line}
    assert not {m for m in imported if m.split(".")[0] in HEAVY}


def test_trajectories_filters_pages_and_formats(two_packs, capsys) -> None:
    server, bad, good, _tmp = two_packs
    url = ("--url", server.admin_url)
    code, out = sextant(capsys, "trajectories", *url)
    assert code == 0, out
    header, *rows = out.splitlines()
    assert header.split()[:3] == ["TRACE", "CLOSED", "SERVICE"]
    assert [r.split()[0] for r in rows] == [good, bad]  # newest first

    code, out = sextant(capsys, "trajectories", *url, "--verdict", "fail", "--format", "json")
    doc = json.loads(out)
    assert [t["trace_id"] for t in doc["trajectories"]] == [bad] and doc["next_cursor"] is None
    assert doc["trajectories"][0]["verdict_reasons"] == ["refund_without_approval"]
    code, out = sextant(capsys, "trajectories", *url, "--reason", "nope")
    assert (code, out.strip()) == (0, "no trajectories")
    code, out = sextant(capsys, "trajectories", *url, "--since", "1h", "--format", "csv")
    parsed = list(csv.DictReader(io.StringIO(out)))
    assert {r["trace_id"] for r in parsed} == {bad, good}

    code, out = sextant(capsys, "trajectories", *url, "--limit", "1", "--format", "json")
    first = json.loads(out)
    assert [t["trace_id"] for t in first["trajectories"]] == [good]
    code, out = sextant(
        capsys, "trajectories", *url, "--limit", "1", "--cursor", first["next_cursor"]
    )
    assert out.splitlines()[1].split()[0] == bad and "more:" not in out
    code, out = sextant(capsys, "trajectories", *url, "--limit", "1")
    assert f"more: --cursor {first['next_cursor']}" in out


def test_trajectories_from_a_stopped_collectors_file(tmp_path: Path, capsys) -> None:
    server = start_server(tmp_path / "data", assembler=FAST)
    try:
        bad = refund_run(server, approve=False)
        trajectory(server, bad)
        code, live = sextant(capsys, "trajectories", "--url", server.admin_url)
        assert code == 0
    finally:
        server.stop()
    db = str(tmp_path / "data/sextant.duckdb")
    code, from_file = sextant(capsys, "trajectories", "--db", db)
    assert code == 0 and from_file == live and bad in from_file
    parquet = str(tmp_path / "parquet")
    code, _ = sextant(capsys, "export", "parquet", "--out", parquet, "--db", db)
    assert code == 0
    code, from_parquet = sextant(capsys, "trajectories", "--parquet", parquet)
    assert code == 0 and from_parquet == live
    # Every file source is locked down: SQL reads the store's tables and nothing else.
    for source in (("--db", db), ("--parquet", parquet)):
        code, out = sextant(capsys, "sql", "SELECT * FROM read_csv('/etc/passwd')", *source)
        assert code == 1 and "table function read_csv is not allowed" in out, source


def test_exit_codes(tmp_path: Path, capsys) -> None:
    code, out = sextant(capsys, "trajectories", "--url", "http://127.0.0.1:1")
    assert code == 3 and "cannot reach http://127.0.0.1:1" in out
    code, out = sextant(capsys, "sql", "SELECT 1", "--db", str(tmp_path / "none.duckdb"))
    assert code == 3 and "no such DuckDB file" in out
    missing = tmp_path / "missing.jsonl"
    code, out = sextant(capsys, "rules", "test", str(V2), "--cases", str(missing))
    assert code == 2 and f"--cases {missing}: cannot read it" in out
    assert "Traceback" not in out
    bad_cases = tmp_path / "bad.jsonl"
    bad_cases.write_text('{"trace_id": "x"}\nnot json\n')
    code, out = sextant(capsys, "rules", "test", str(V2), "--cases", str(bad_cases))
    assert code == 2 and f"{bad_cases}:2: not a JSON object" in out
    code, out = sextant(capsys, "show")
    assert code == 2 and "give a TRACE_ID, --latest or --session ID" in out
    code, out = sextant(capsys, "trajectories", "--since", "yesterday")
    assert code == 2 and "expected an ISO 8601 time" in out


def test_replay_of_one_pack_leaves_the_other_packs_out(two_packs, capsys) -> None:
    server, bad, good, _ = two_packs
    default = str(BUILTIN_RULES / "default.yaml")
    args = ["replay", "--url", server.admin_url, "--rules", default, "--trace-id", bad]
    code, out = sextant(capsys, *args)
    assert code == 0, out
    # The incident fails refunds, not default: replaying default alone changes nothing.
    assert "fail -> pass" not in out and "0 rule changes, 0 verdict changes" in out
    code, out = sextant(capsys, *args, "--expect", f"pass:{bad}", "--format", "json")
    assert code == 0 and out.startswith("[]") and f"expect pass:{bad}: ok" in out
    code, out = sextant(capsys, *args[:3], "--rules", str(V2), "--trace-id", good)
    assert code == 0 and "1 of 1 selected trajectories under refunds 2" in out


def test_export_case_needs_no_pack(two_packs, tmp_path: Path, capsys) -> None:
    server, bad, _good, _ = two_packs
    cases = tmp_path / "cases.jsonl"
    code, out = sextant(
        capsys, "export", "case", bad, "--out", str(cases), "--url", server.admin_url
    )
    assert code == 0, out
    (case,) = [json.loads(line) for line in cases.read_text().splitlines()]
    assert set(case["expect"]["packs"]) == {"default", "refunds"}
    assert case["expect"]["packs"]["refunds"]["verdict"] == "fail"
    # Each pack is tested against its own expectation.
    for pack in (V2, BUILTIN_RULES / "default.yaml"):
        code, out = sextant(capsys, "rules", "test", str(pack), "--cases", str(cases))
        assert code == 0 and "1 of 1 cases as expected" in out, out
    other = BUILTIN_RULES / "support-agent.yaml"
    code, out = sextant(capsys, "rules", "test", str(other), "--cases", str(cases))
    assert code == 1 and "no expectation for pack" in out and "--pack NAME" in out

    code, out = sextant(
        capsys,
        *("export", "case", bad, "--out", str(cases), "--url", server.admin_url),
        *("--pack", "refunds"),
    )
    assert code == 0
    assert json.loads(cases.read_text())["expect"]["verdict"] == "fail"
