"""Parquet export round trip, the service's periodic export, and retention."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import duckdb
import pytest
from prometheus_client import CollectorRegistry

from collector.clock import FakeClock
from collector.store.export import DATE_COLUMNS
from collector.store.retention import Retention, RetentionMetrics
from tests.support.admin import trajectory
from tests.support.agents import refund_run
from tests.support.cli import sextant, sextant_streams
from tests.support.server import FAST, RunningServer, start_server
from tests.support.wait import wait_for

ORDER = {
    "spans": "trace_id, span_id",
    "trajectories": "trace_id, revision",
    "steps": "trace_id, revision, seq",
    "results": "trace_id, rule_id",
    "rule_packs": "sha256",
}


def stored(con, table: str) -> list[tuple]:  # type: ignore[no-untyped-def]
    return con.execute(f"SELECT * FROM {table} ORDER BY {ORDER[table]}").fetchall()


def exported(out: Path, table: str) -> list[tuple]:
    pattern = str(out / f"table={table}" / "*" / "*.parquet")
    con = duckdb.connect()
    return con.execute(
        'SELECT * EXCLUDE ("table", date)'
        f" FROM read_parquet('{pattern}', hive_partitioning = true)"
        f" ORDER BY {ORDER[table]}"
    ).fetchall()


@pytest.fixture
def runs(tmp_path: Path) -> RunningServer:
    server = start_server(tmp_path / "data", assembler=FAST, export={"parquet_dir": None})
    for approve in (True, False):
        trajectory(server, refund_run(server, approve))
    yield server
    server.stop()


def test_duckdb_reads_back_the_same_rows(runs: RunningServer, tmp_path: Path, capsys) -> None:
    out = tmp_path / "export"
    code, printed, _ = sextant_streams(
        capsys, "export", "parquet", "--out", str(out), "--url", runs.admin_url
    )
    assert code == 0
    con = runs.cursor()
    for table in ORDER:
        rows = stored(con, table)
        assert rows, table
        back = exported(out, table)
        assert len(back) == len(rows), table
        for got, want in zip(back, rows, strict=True):
            assert dict(enumerate(got)) == dict(enumerate(want)), table
    today = datetime.now().strftime("%Y-%m-%d")
    assert (out / "table=results" / f"date={today}").is_dir()
    assert f"spans: {len(stored(con, 'spans'))} rows" in printed

    # The same export from the file of the stopped collector, and queried in place with DuckDB.
    runs.stop()
    again = tmp_path / "again"
    db = str(tmp_path / "data" / "sextant.duckdb")
    sextant(capsys, "export", "parquet", "--out", str(again), "--db", db, "--since", "1d")
    for table in ORDER:
        assert exported(again, table) == exported(out, table)


def test_the_service_exports_periodically(tmp_path: Path) -> None:
    out = tmp_path / "parquet"
    server = start_server(
        tmp_path / "data",
        assembler=FAST,
        export={"parquet_dir": str(out), "interval_seconds": 0.2},
    )
    try:
        trace_id = refund_run(server, approve=False)
        trajectory(server, trace_id)

        def has_trajectory() -> bool:
            if not list(out.glob("table=trajectories/*/*.parquet")):
                return False
            return bool(exported(out, "trajectories"))

        wait_for(has_trajectory)
        assert [r[0] for r in exported(out, "trajectories")] == [trace_id]
    finally:
        server.stop()


def test_retention_deletes_old_days_after_exporting_them(runs: RunningServer, tmp_path: Path):
    database = runs.pipeline.database
    con = runs.cursor()
    newest = con.execute("SELECT max(start_time) FROM spans").fetchone()[0]
    counts = {t: con.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in ORDER}
    exported_until: list[datetime] = []
    out = tmp_path / "kept"

    def export(cutoff: datetime) -> None:
        from collector.store.export import database_reader, export_parquet

        exported_until.append(cutoff)
        export_parquet(database_reader(database), out, until=cutoff)

    def retention(now: datetime) -> Retention:
        clock = FakeClock(wall=now.replace(tzinfo=UTC).timestamp())
        return Retention(
            database, timedelta(days=7), 3600, RetentionMetrics(CollectorRegistry()), export, clock
        )

    # Six days later nothing is old enough.
    assert not any(retention(newest + timedelta(days=6)).run().values())
    # Nine days later the runs' day is gone: exported first, then deleted; results are kept.
    deleted = retention(newest + timedelta(days=9)).run()
    assert deleted["spans"] == counts["spans"]
    assert deleted["trajectories"] == counts["trajectories"]
    assert deleted["steps"] == counts["steps"]
    for table in ("spans", "trajectories", "steps"):
        assert con.execute(f"SELECT count(*) FROM {table}").fetchone()[0] == 0
        assert len(exported(out, table)) == counts[table]
    assert con.execute("SELECT count(*) FROM results").fetchone()[0] == counts["results"]
    assert exported_until[-1].time() == datetime.min.time()
    assert set(DATE_COLUMNS) >= set(ORDER)


def test_export_first_needs_an_export_directory(tmp_path: Path) -> None:
    from collector.config import load_config
    from collector.errors import ConfigError

    with pytest.raises(ConfigError, match=r"export\.parquet_dir"):
        load_config(
            None, environ={}, overrides={"storage": {"retention": {"days": 3, "export_first": 1}}}
        )
