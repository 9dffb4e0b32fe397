"""The SQL endpoint as a sandbox: queries that would stop, reconfigure or read past the store are
refused before they run, against a `sextant serve` process in its default configuration."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests

from tests.support.cli import sextant
from tests.support.otlp import simple_spans, trace_request
from tests.support.process import EPHEMERAL, Serve

PROTOBUF = {"Content-Type": "application/x-protobuf"}


@pytest.fixture(scope="module")
def collector(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Serve, Path]]:
    """No config file and no token: the configuration an operator starts with."""
    cwd = tmp_path_factory.mktemp("sandbox")
    serve = Serve([*EPHEMERAL, "--data-dir", str(cwd / "d")], cwd)
    assert len(serve.ports) == 3, serve.output
    yield serve, cwd
    if serve.proc.poll() is None:
        serve.stop(signal.SIGTERM)


def sql(serve: Serve, query: str) -> requests.Response:
    url = f"http://127.0.0.1:{serve.ports['admin']}/api/v1/sql"
    return requests.post(url, json={"sql": query}, timeout=30)


def hostile(db: Path) -> dict[str, str]:
    """Query → the reason it is refused. `db` is the store's own file."""
    fn = "table function {} is not allowed"
    return {
        # abort the process (a PermissionException thrown where nothing catches it)
        "SELECT * FROM enable_logging(storage := 'file', storage_path := 'logs')": fn.format(
            "enable_logging"
        ),
        # turn on logging of every connection's SQL, then read it back
        "SELECT * FROM enable_logging(level := 'trace')": fn.format("enable_logging"),
        "SELECT * FROM duckdb_logs()": fn.format("duckdb_logs"),
        "SELECT * FROM duckdb_logs": "table duckdb_logs is not allowed",
        "SELECT * FROM system.main.duckdb_logs": "table system.main.duckdb_logs is not allowed",
        "SELECT * FROM truncate_duckdb_logs()": fn.format("truncate_duckdb_logs"),
        "SELECT write_log('forged', level := 'error')": "function write_log is not allowed",
        # write to the store
        "SELECT * FROM checkpoint()": fn.format("checkpoint"),
        "SELECT * FROM force_checkpoint()": fn.format("force_checkpoint"),
        "SELECT 1 WHERE EXISTS (SELECT * FROM checkpoint())": fn.format("checkpoint"),
        "WITH c AS (SELECT * FROM checkpoint()) SELECT 1": fn.format("checkpoint"),
        "SELECT (SELECT count(*) FROM checkpoint()) AS n": fn.format("checkpoint"),
        "EXPLAIN ANALYZE SELECT * FROM checkpoint()": fn.format("checkpoint"),
        # the database's own files, which DuckDB lets through with external access disabled
        f"SELECT length(content) FROM read_blob('{db}')": fn.format("read_blob"),
        f"SELECT content FROM read_text('{db}.wal')": fn.format("read_text"),
        f"SELECT * FROM read_duckdb('{db}')": fn.format("read_duckdb"),
        f"SELECT * FROM '{db}'": f"table {db} is not allowed",
        # settings, secrets and other sessions
        "SELECT * FROM duckdb_settings()": fn.format("duckdb_settings"),
        "SELECT * FROM duckdb_secrets()": fn.format("duckdb_secrets"),
        "SELECT * FROM duckdb_databases()": fn.format("duckdb_databases"),
        "SELECT * FROM query('SELECT * FROM checkpoint()')": fn.format("query"),
        "SELECT * FROM pragma_database_size()": fn.format("pragma_database_size"),
    }


def test_hostile_queries_are_refused_and_the_collector_keeps_serving(
    collector: tuple[Serve, Path],
) -> None:
    serve, cwd = collector
    db = (cwd / "d" / "sextant.duckdb").resolve()
    for query, reason in hostile(db).items():
        reply = sql(serve, query)
        assert reply.status_code == 400, (query, reply.text[:200])
        assert reason in reply.json()["error"], query
        assert serve.proc.poll() is None, f"{query} stopped the collector:\n{serve.output}"
    assert not (cwd / "logs").exists()
    otlp = requests.post(
        f"http://127.0.0.1:{serve.ports['OTLP/HTTP']}/v1/traces",
        data=trace_request(simple_spans(3)).SerializeToString(),
        headers=PROTOBUF,
        timeout=10,
    )
    assert otlp.status_code == 200
    reply = sql(serve, "SELECT current_setting('enable_logging') AS logging")
    assert reply.status_code == 200 and reply.json()["rows"] == [[False]]


def test_the_stores_tables_views_and_generators_still_answer(
    collector: tuple[Serve, Path],
) -> None:
    serve, _ = collector
    for query in (
        "SELECT count(*) FROM range(10)",
        "SELECT * FROM generate_series(1, 3)",
        "SELECT unnest([1, 2, 3]) AS n",
        "SELECT * FROM unnest([1, 2]) t(n)",
        "SELECT key, value FROM json_each('{\"a\": 1}')",
        "SELECT table_name FROM duckdb_tables() ORDER BY 1",
        "SELECT column_name FROM duckdb_columns() WHERE table_name = 'spans'",
        "SELECT view_name FROM duckdb_views() WHERE NOT internal",
        "SELECT table_name FROM information_schema.tables",
        "SELECT column_name FROM information_schema.columns WHERE table_name = 'spans'",
        "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r WHERE n < 5) FROM r",
        "WITH spans_by_kind AS (FROM spans) SELECT count(*) FROM spans_by_kind",
        "SELECT count(*) FROM main.spans",
        "SELECT random() < 2 AS yes, gen_random_uuid() IS NOT NULL AS uuid",
        "SHOW ALL TABLES",
        "SHOW spans",
        "SELECT * FROM (UNPIVOT (SELECT 1 AS a, 2 AS b) ON a, b INTO NAME k VALUE v)",
    ):
        reply = sql(serve, query)
        assert reply.status_code == 200, (query, reply.text[:300])


def test_sextant_sql_on_a_file_refuses_its_own_file(
    collector: tuple[Serve, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    serve, cwd = collector
    serve.stop(signal.SIGTERM)
    db = (cwd / "d" / "sextant.duckdb").resolve()
    for query, reason in (
        (f"SELECT length(content) FROM read_blob('{db}')", "table function read_blob"),
        ("SELECT * FROM checkpoint()", "table function checkpoint"),
        ("SELECT * FROM duckdb_settings()", "table function duckdb_settings"),
    ):
        code, out = sextant(capsys, "sql", query, "--db", str(db))
        assert code == 1 and reason in out, (query, out)
    code, out = sextant(capsys, "sql", "SELECT count(*) AS n FROM spans", "--db", str(db))
    assert code == 0 and "3" in out
