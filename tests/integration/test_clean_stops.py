"""SIGTERM while a background stage reads a large store: the read in flight is interrupted,
the process exits 0 within its shutdown timeout, and the store is closed and opens again."""

from __future__ import annotations

import runpy
import shutil
import signal
import time
from datetime import UTC, datetime
from pathlib import Path

import duckdb
import pytest

from collector.store.database import Database
from tests.support.process import EPHEMERAL, Serve

DRIFT_PACK = """
name: bench
version: "1"
owner: bench
rules:
  - id: drift
    type: drift
    interval: 1s
    baseline: {last: 7d}
    current: {last: 1h}
    reason: behaviour_drift
"""
RUNS = 300_000  # a drift round or an export over them takes a second or more on two cores
SHUTDOWN_TIMEOUT_SECONDS = 5.0
CONFIGS = {
    # stage: (its config, the log line when it starts reading, the line when it gives up)
    "drift round": (
        "rules: {{paths: [{dir}/bench.yaml]}}\ndrift: {{tick_seconds: 0.1}}\n",
        "window rule bench/drift: evaluating",
        "window rule bench/drift abandoned: shutting down",
    ),
    "export": (
        "export: {{parquet_dir: {dir}/parquet, interval_seconds: 0.2}}\n",
        "export to {dir}/parquet: starting",
        "export to {dir}/parquet abandoned: shutting down",
    ),
}


@pytest.fixture(scope="module")
def large_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A store of RUNS trajectories with steps and results, built once for the module."""
    benchmark = runpy.run_path(str(Path(__file__).parents[2] / "scripts" / "benchmark-drift"))
    path = tmp_path_factory.mktemp("large") / "sextant.duckdb"
    db = Database(path, "1GB")
    db.open()
    benchmark["build"](db, RUNS, datetime.now(UTC).replace(tzinfo=None))
    db.close()
    return path


@pytest.mark.parametrize("stage", sorted(CONFIGS))
def test_sigterm_while_a_stage_reads_exits_0_with_the_store_closed(
    tmp_path: Path, large_store: Path, stage: str
) -> None:
    config, started_line, abandoned_line = (text.format(dir=tmp_path) for text in CONFIGS[stage])
    (tmp_path / "d").mkdir()
    shutil.copy(large_store, tmp_path / "d" / "sextant.duckdb")
    (tmp_path / "bench.yaml").write_text(DRIFT_PACK)
    (tmp_path / "sextant.yaml").write_text(config)
    env = {
        "SEXTANT_LOG_LEVEL": "DEBUG",
        "SEXTANT_SHUTDOWN_TIMEOUT_SECONDS": str(SHUTDOWN_TIMEOUT_SECONDS),
    }
    args = ["--config", str(tmp_path / "sextant.yaml"), "--data-dir", str(tmp_path / "d")]
    serve = Serve([*args, *EPHEMERAL], tmp_path, env)
    assert len(serve.ports) == 3, serve.output
    deadline = time.monotonic() + 15
    while started_line not in serve.output:
        if time.monotonic() > deadline or serve.proc.poll() is not None:
            serve.proc.kill()  # never leave a server running behind a failed test
            pytest.fail(f"the {stage} never started:\n{serve.output}")
        time.sleep(0.01)

    started = time.monotonic()
    assert serve.stop(signal.SIGTERM) == 0, serve.output
    took = time.monotonic() - started
    assert abandoned_line in serve.output
    assert "stopped; store closed cleanly" in serve.output
    assert took < SHUTDOWN_TIMEOUT_SECONDS, serve.output
    con = duckdb.connect(str(tmp_path / "d" / "sextant.duckdb"), read_only=True)
    assert con.execute("SELECT count(*) FROM trajectories").fetchone() == (RUNS,)
