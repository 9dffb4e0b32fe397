"""Configuring `sextant serve` as a user does: exported variables, --rules, and config errors
that are one message and exit code 2, never a traceback."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import requests

from collector.config.sections import BUILTIN_RULES
from tests.support.process import EPHEMERAL, Serve

# Where no worker matters: a collector without worker processes starts sooner.
INLINE = {"SEXTANT_WORKERS__PROCESSES": "0"}


def sextant_cli(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "collector.cli", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def packs_in_force(serve: Serve) -> list[str]:
    reply = requests.get(f"http://127.0.0.1:{serve.ports['admin']}/api/v1/rules", timeout=10)
    return sorted(Path(p["source"]).name for p in reply.json()["packs"] if p["pack"])


def two_packs(tmp_path: Path) -> tuple[Path, Path]:
    shutil.copy(BUILTIN_RULES / "support-agent.yaml", tmp_path / "support.yaml")
    shutil.copy(BUILTIN_RULES / "travel-agent.yaml", tmp_path / "travel.yaml")
    return tmp_path / "support.yaml", tmp_path / "travel.yaml"


def test_the_cli_token_exported_beside_serve_is_the_cli_s_alone(tmp_path: Path) -> None:
    """SEXTANT_TOKEN (the CLI's) and another tool's SEXTANT_* variable do not stop serve;
    the CLI sends the exported token, accepted from a comma list of tokens."""
    env = {
        **os.environ,
        "SEXTANT_TOKEN": "s3cret-0123456789",
        "SEXTANT_SOMETHING_ELSE": "another tool's",
        "SEXTANT_AUTH__TOKENS": "other-0123456789, s3cret-0123456789",
    }
    serve = Serve([*EPHEMERAL, "--data-dir", str(tmp_path / "d")], tmp_path, env=env)
    try:
        assert set(serve.ports) == {"OTLP/gRPC", "OTLP/HTTP", "admin"}, serve.output
        url = f"http://127.0.0.1:{serve.ports['admin']}"
        done = sextant_cli("sql", "SELECT 42 AS answer", "--url", url, env=env)
        assert done.returncode == 0, done.stderr
        assert "42" in done.stdout
        no_token = {k: v for k, v in env.items() if k != "SEXTANT_TOKEN"}
        refused = sextant_cli("sql", "SELECT 42 AS answer", "--url", url, env=no_token)
        assert refused.returncode == 1
        assert "401" in refused.stderr
    finally:
        assert serve.stop() == 0


@pytest.mark.parametrize("form", ["comma", "json", "yaml"])
def test_rules_paths_from_the_environment_in_every_list_form(tmp_path: Path, form: str) -> None:
    support, travel = two_packs(tmp_path)
    value = {
        "comma": f"{support},{travel}",
        "json": json.dumps([str(support), str(travel)]),
        "yaml": f"[{support}, {travel}]",
    }[form]
    data = ["--data-dir", str(tmp_path / "d")]
    serve = Serve([*EPHEMERAL, *data], tmp_path, env={**INLINE, "SEXTANT_RULES__PATHS": value})
    try:
        assert set(serve.ports) == {"OTLP/gRPC", "OTLP/HTTP", "admin"}, serve.output
        assert packs_in_force(serve) == ["support.yaml", "travel.yaml"]
    finally:
        assert serve.stop() == 0


def test_serve_rules_names_the_packs_instead_of_the_shipped_ones(tmp_path: Path) -> None:
    support, travel = two_packs(tmp_path)
    data = ["--data-dir", str(tmp_path / "d")]
    serve = Serve([*EPHEMERAL, *data, "--rules", str(support)], tmp_path, env=INLINE)
    try:
        assert set(serve.ports) == {"OTLP/gRPC", "OTLP/HTTP", "admin"}, serve.output
        assert packs_in_force(serve) == ["support.yaml"]
    finally:
        assert serve.stop() == 0
    both = ["--rules", str(support), "--rules", str(travel)]
    again = Serve([*EPHEMERAL, *data, *both], tmp_path, env=INLINE)
    try:
        assert packs_in_force(again) == ["support.yaml", "travel.yaml"]
    finally:
        assert again.stop() == 0


def test_rules_that_are_not_there_are_said_at_start(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere"
    args = [*EPHEMERAL, "--data-dir", str(tmp_path / "d"), "--rules", str(missing)]
    serve = Serve(args, tmp_path, env=INLINE)
    try:
        assert set(serve.ports) == {"OTLP/gRPC", "OTLP/HTTP", "admin"}, serve.output
        assert f"rules.paths: {missing} does not exist" in serve.output
        assert "no rule packs found: nothing is evaluated" in serve.output
    finally:
        assert serve.stop() == 0


@pytest.mark.parametrize(
    ("env", "config", "message"),
    [
        ({"SEXTANT_LOG_LEVEL": "loud"}, None, "log_level: "),
        ({}, "log_level: loud\n", "log_level: "),
        ({"SEXTANT_GRPCC__ADDR": "127.0.0.1:0"}, None, "SEXTANT_GRPCC__ADDR: unknown section"),
        ({"SEXTANT_GRPC__ADRR": "127.0.0.1:0"}, None, "grpc.adrr: unknown key"),
        ({"SEXTANT_WORKERS__PROCESSES": "many"}, None, "workers.processes: "),
    ],
)
def test_a_config_error_is_one_line_and_exit_code_2(
    tmp_path: Path, env: dict[str, str], config: str | None, message: str
) -> None:
    args = [*EPHEMERAL, "--data-dir", str(tmp_path / "d")]
    if config is not None:
        (tmp_path / "sextant.yaml").write_text(config)
        args += ["--config", str(tmp_path / "sextant.yaml")]
    done = subprocess.run(
        [sys.executable, "-m", "collector.cli", "serve", *args],
        cwd=tmp_path,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("sextant: invalid configuration"), lines
    assert message in lines[0]
