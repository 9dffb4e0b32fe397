"""Live read-only SQL on the admin port while the collector keeps ingesting."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
import requests

from tests.support.cli import sextant, sextant_streams
from tests.support.otlp import TRACE_EXPORT, simple_spans, trace_request
from tests.support.server import FAST, RunningServer, start_server
from tests.support.wait import wait_for

TOKEN = "sql-token-0123456789"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


@pytest.fixture
def live(tmp_path: Path) -> Iterator[RunningServer]:
    running = start_server(
        tmp_path / "data",
        auth={"tokens": [TOKEN]},
        assembler=FAST,
        sql={"timeout_seconds": 1.0, "max_rows": 5000},
    )
    yield running
    running.stop()


class Ingest:
    """Sends a 5-span trace at a time over OTLP/gRPC until stopped, counting acknowledged spans."""

    def __init__(self, server: RunningServer) -> None:
        self.server = server
        self.acked = 0
        self.errors: list[str] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        with grpc.insecure_channel(self.server.grpc_endpoint) as channel:
            export = channel.unary_unary(TRACE_EXPORT)
            while not self.stop.is_set():
                request = trace_request(simple_spans(5))
                try:
                    export(
                        request.SerializeToString(),
                        metadata=[("authorization", f"Bearer {TOKEN}")],
                        timeout=10,
                    )
                    self.acked += 5
                except grpc.RpcError as exc:
                    self.errors.append(str(exc.code()))

    def __enter__(self) -> Ingest:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join(10)


def sql(server: RunningServer, query: str, **extra: object) -> requests.Response:
    return requests.post(
        f"{server.admin_url}/api/v1/sql", json={"sql": query, **extra}, headers=AUTH, timeout=30
    )


def span_count(server: RunningServer) -> int:
    reply = sql(server, "SELECT count(*) AS n FROM spans")
    assert reply.status_code == 200, reply.text
    return reply.json()["rows"][0][0]


def test_reads_see_rows_arrive_while_ingest_runs(live: RunningServer) -> None:
    with Ingest(live) as ingest:
        wait_for(lambda: ingest.acked >= 50)
        counts = [span_count(live)]
        for _ in range(5):
            counts.append(wait_for(lambda last=counts[-1]: (n := span_count(live)) > last and n))
        acked_before = ingest.acked
        wait_for(lambda: ingest.acked > acked_before + 50)
    assert counts == sorted(counts) and counts[-1] > counts[0]
    assert not ingest.errors
    assert span_count(live) == ingest.acked


REFUSED = {
    "INSERT INTO spans (trace_id, span_id) VALUES ('a', 'b')": "INSERT statements are not allowed",
    "UPDATE trajectories SET verdict = 'pass'": "UPDATE statements are not allowed",
    "DELETE FROM spans": "DELETE statements are not allowed",
    "DROP TABLE spans": "DROP statements are not allowed",
    "CREATE TABLE x AS SELECT 1": "CREATE statements are not allowed",
    "COPY spans TO '/tmp/stolen.csv'": "COPY statements are not allowed",
    "ATTACH '/tmp/other.duckdb' AS other": "ATTACH statements are not allowed",
    "INSTALL httpfs": "LOAD statements are not allowed",
    "LOAD httpfs": "LOAD statements are not allowed",
    "PRAGMA database_list": "PRAGMA statements are not allowed",
    "SET threads = 1": "SET statements are not allowed",
    "CALL pragma_version()": "CALL statements are not allowed",
    "CHECKPOINT": "CALL statements are not allowed",
    "EXPORT DATABASE '/tmp/dump'": "EXPORT statements are not allowed",
    "SELECT 1; DROP TABLE spans": "one statement at a time (2 given)",
    "SELECT 1; SELECT 2": "one statement at a time (2 given)",
    "EXPLAIN ANALYZE DELETE FROM spans": "EXPLAIN DELETE is not allowed",
    "EXPLAIN ANALYZE CHECKPOINT": "EXPLAIN CALL is not allowed",
    "SELECT * FROM read_csv('/etc/passwd')": "table function read_csv is not allowed",
    "SELECT * FROM read_text('/etc/passwd')": "table function read_text is not allowed",
    "SELECT * FROM '/etc/passwd'": "table /etc/passwd is not allowed",
    "SELECT * FROM glob('/etc/*')": "table function glob is not allowed",
    "SELECT * FROM read_parquet('https://example.com/x.parquet')": "table function read_parquet"
    " is not allowed",
    "SELECT * FROM query('DELETE FROM spans')": "table function query is not allowed",
    "SELEC 1": "syntax error",
    "": "no SQL statement given",
}


@pytest.mark.parametrize("query", list(REFUSED))
def test_writes_and_file_access_are_refused_with_a_reason(live: RunningServer, query: str) -> None:
    reply = sql(live, query)
    assert reply.status_code == 400
    assert REFUSED[query] in reply.json()["error"]


def test_refusals_leave_the_store_intact_and_ingest_going(live: RunningServer) -> None:
    with Ingest(live) as ingest:
        wait_for(lambda: ingest.acked >= 20)
        for query in REFUSED:
            assert sql(live, query).status_code == 400
        before = ingest.acked
        wait_for(lambda: ingest.acked > before + 20)
    assert not ingest.errors
    assert not Path("/tmp/stolen.csv").exists()
    assert span_count(live) == ingest.acked


def test_a_slow_query_is_interrupted_at_the_deadline_while_ingest_goes_on(
    live: RunningServer,
) -> None:
    with Ingest(live) as ingest:
        wait_for(lambda: ingest.acked >= 20)
        before = ingest.acked
        reply = sql(live, "SELECT count(*) FROM range(100000000000) a")
        assert reply.status_code == 400
        assert "interrupted at its deadline of 1 s" in reply.json()["error"]
        assert reply.elapsed.total_seconds() < 5
        assert ingest.acked > before
        assert span_count(live) > 0
    assert not ingest.errors


def test_read_only_statement_kinds_answer(live: RunningServer) -> None:
    for query in (
        "SELECT 1 AS one",
        "WITH x AS (SELECT 2 AS n) SELECT n FROM x",
        "FROM trajectories LIMIT 1",
        "DESCRIBE spans",
        "SHOW TABLES",
        "SUMMARIZE trajectories",
        "EXPLAIN SELECT count(*) FROM spans",
        "EXPLAIN ANALYZE SELECT count(*) FROM spans",
        "SELECT * FROM tool_calls",
        "SELECT * FROM failures",
        "SELECT * FROM current_decisions",
        "SELECT * FROM slowest_runs LIMIT 5",
        "SELECT * FROM costliest_runs LIMIT 5",
    ):
        reply = sql(live, query)
        assert reply.status_code == 200, (query, reply.text)
    shown = {row[0] for row in sql(live, "SHOW TABLES").json()["rows"]}
    assert {"spans", "tool_calls", "failures", "current_decisions", "slowest_runs"} <= shown


def test_row_limit_params_and_auth(live: RunningServer) -> None:
    reply = sql(live, "SELECT * FROM range(10000)", max_rows=100)
    assert (reply.json()["row_count"], reply.json()["truncated"]) == (100, True)
    reply = sql(live, "SELECT ? + 1 AS n", params=[41])
    assert reply.json()["rows"] == [[42]]
    assert sql(live, "SELECT 1", max_rows=10**9).status_code == 400
    no_token = requests.post(f"{live.admin_url}/api/v1/sql", json={"sql": "SELECT 1"}, timeout=5)
    assert no_token.status_code == 401
    assert "Authorization" in no_token.json()["error"]
    wrong = requests.post(
        f"{live.admin_url}/api/v1/sql",
        json={"sql": "SELECT 1"},
        headers={"Authorization": "Bearer nope"},
        timeout=5,
    )
    assert wrong.status_code == 401


def test_sextant_sql_command(live: RunningServer, capsys: pytest.CaptureFixture[str]) -> None:
    def run(*args: str) -> tuple[int, str, str]:
        return sextant_streams(capsys, "sql", *args, "--url", live.admin_url, "--token", TOKEN)

    code, out, _ = run("SELECT 41 + 1 AS answer, 'x' AS s", "--format", "csv")
    assert (code, out.splitlines()) == (0, ["answer,s", "42,x"])
    code, out, _ = run("SELECT 42 AS answer", "--format", "json")
    assert (code, out.strip().replace(" ", "").replace("\n", "")) == (0, '[{"answer":42}]')
    code, out, _ = run("SELECT 42 AS answer")
    assert out.splitlines()[0] == "answer" and "42" in out and "(1 row)" in out
    code, _, err = run("DROP TABLE spans")
    assert code == 1 and "DROP statements are not allowed" in err


def test_sextant_sql_on_a_stopped_collectors_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    server = start_server(tmp_path / "data")
    with grpc.insecure_channel(server.grpc_endpoint) as channel:
        channel.unary_unary(TRACE_EXPORT)(trace_request(simple_spans(3)).SerializeToString())
    server.stop()
    db = str(tmp_path / "data" / "sextant.duckdb")
    for query, expected, code in (
        ("SELECT count(*) AS n FROM spans", "3", 0),
        ("SELECT * FROM read_csv('/etc/passwd')", "table function read_csv is not allowed", 1),
        ("DELETE FROM spans", "DELETE statements are not allowed", 1),
    ):
        exit_code, printed = sextant(capsys, "sql", query, "--db", db, "--format", "csv")
        assert exit_code == code
        assert expected in printed


def test_a_cluster_query_missing_a_replica_says_so(
    live: RunningServer, capsys: pytest.CaptureFixture[str]
) -> None:
    """Rows from the replicas that answered, the one that did not named, exit 1."""
    dead = "http://127.0.0.1:1"
    code, out, err = sextant_streams(
        capsys, "sql", "--cluster", f"{live.admin_url},{dead}", "--token", TOKEN,
        "--format", "json", "SELECT 1 AS one",
    )  # fmt: skip
    assert code == 1
    assert "replica 127.0.0.1:1 did not answer" in err
    (row,) = json.loads(out)
    assert row == {"replica": live.admin_url.removeprefix("http://"), "one": 1}
