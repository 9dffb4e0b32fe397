"""`sextant serve` as a process: defaults, flags, config errors, port conflicts, clean SIGTERM."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import duckdb
import grpc
import pytest
import requests

from collector.store.migrations import SCHEMA_VERSION
from tests.support.otlp import TRACE_EXPORT, new_trace_id, simple_spans, trace_request
from tests.support.process import EPHEMERAL, Serve


def run_failing(args: list[str], cwd: Path, env: dict[str, str] | None = None):
    return subprocess.run(
        [sys.executable, "-m", "collector.cli", "serve", *args],
        cwd=cwd,
        env={**os.environ, **(env or {})},
        capture_output=True,
        text=True,
        timeout=60,
    )


def export(port: int, body: bytes) -> None:
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        channel.unary_unary(TRACE_EXPORT)(body, timeout=10)


def test_sigterm_drains_flushes_and_closes_cleanly(tmp_path: Path) -> None:
    """Requests keep arriving while SIGTERM lands: every acknowledged span is in the store."""
    serve = Serve([*EPHEMERAL, "--data-dir", str(tmp_path / "d")], tmp_path)
    assert set(serve.ports) == {"OTLP/gRPC", "OTLP/HTTP", "admin"}, serve.output
    port = serve.ports["OTLP/gRPC"]
    acknowledged: list[str] = []
    stop = threading.Event()

    def sender() -> None:
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            call = channel.unary_unary(TRACE_EXPORT)
            while not stop.is_set():
                trace_id = new_trace_id()
                try:
                    call(trace_request(simple_spans(50, trace_id)).SerializeToString(), timeout=5)
                except grpc.RpcError:
                    return
                acknowledged.append(trace_id.hex())

    threads = [threading.Thread(target=sender) for _ in range(3)]
    for t in threads:
        t.start()
    while len(acknowledged) < 20:
        time.sleep(0.01)
    assert serve.stop(signal.SIGTERM) == 0
    stop.set()
    for t in threads:
        t.join(10)
    assert "stopped; store closed cleanly" in serve.output

    con = duckdb.connect(str(tmp_path / "d" / "sextant.duckdb"), read_only=True)
    counts = dict(con.execute("SELECT trace_id, count(*) FROM spans GROUP BY 1").fetchall())
    assert all(counts.get(trace_id) == 50 for trace_id in acknowledged)
    assert con.execute("SELECT max(version) FROM schema_version").fetchone() == (SCHEMA_VERSION,)


def test_sigint_also_stops_cleanly(tmp_path: Path) -> None:
    serve = Serve([*EPHEMERAL, "--data-dir", str(tmp_path / "d")], tmp_path)
    export(serve.ports["OTLP/gRPC"], trace_request(simple_spans(3)).SerializeToString())
    assert requests.get(f"http://127.0.0.1:{serve.ports['admin']}/readyz").status_code == 200
    assert serve.stop(signal.SIGINT) == 0
    con = duckdb.connect(str(tmp_path / "d" / "sextant.duckdb"), read_only=True)
    assert con.execute("SELECT count(*) FROM spans").fetchone() == (3,)


@pytest.mark.parametrize(
    ("flag", "what"), [("--grpc-addr", "OTLP/gRPC"), ("--http-addr", "OTLP/HTTP")]
)
def test_a_port_held_by_another_process_fails_startup(tmp_path: Path, flag: str, what: str):
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import socket,sys,time; s=socket.socket(); s.bind(('127.0.0.1',0)); s.listen();"
            " print(s.getsockname()[1], flush=True); time.sleep(60)",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        port = int(holder.stdout.readline())
        args = [*EPHEMERAL, "--data-dir", str(tmp_path / "d")]
        args[args.index(flag) + 1] = f"127.0.0.1:{port}"
        result = run_failing(args, tmp_path)
        assert result.returncode == 1
        assert f"cannot listen on 127.0.0.1:{port} for {what}" in result.stderr
    finally:
        holder.kill()
        holder.wait()


def test_invalid_config_file_names_field_and_reason(tmp_path: Path) -> None:
    config = tmp_path / "sextant.yaml"
    config.write_text("grpc:\n  addr: nowhere\nlimits:\n  max_request_bytes: -1\n  colour: red\n")
    result = run_failing(["--config", str(config)], tmp_path)
    assert result.returncode == 2
    assert "grpc.addr: Value error, expected HOST:PORT" in result.stderr
    assert "limits.max_request_bytes: Input should be greater than 0" in result.stderr
    assert "limits.colour: unknown key" in result.stderr

    result = run_failing(["--config", str(tmp_path / "missing.yaml")], tmp_path)
    assert result.returncode == 2
    assert "cannot read config file" in result.stderr


def test_config_file_then_environment_then_flags(tmp_path: Path) -> None:
    config = tmp_path / "sextant.yaml"
    config.write_text(
        "grpc: {addr: '127.0.0.1:0'}\nhttp: {addr: '127.0.0.1:1'}\nadmin: {addr: '127.0.0.1:0'}\n"
        f"storage: {{data_dir: {tmp_path / 'from-file'}}}\n"
    )
    serve = Serve(
        ["--config", str(config), "--data-dir", str(tmp_path / "from-flag")],
        tmp_path,
        env={
            "SEXTANT_HTTP__ADDR": "127.0.0.1:0",  # overrides the unusable port 1 of the file
            "SEXTANT_STORAGE__DATA_DIR": str(tmp_path / "from-env"),
        },
    )
    try:
        assert set(serve.ports) == {"OTLP/gRPC", "OTLP/HTTP", "admin"}, serve.output
        assert serve.ports["OTLP/HTTP"] != 1
    finally:
        assert serve.stop() == 0
    assert (tmp_path / "from-flag" / "sextant.duckdb").exists()
    assert not (tmp_path / "from-env").exists()
    assert not (tmp_path / "from-file").exists()


def port_free(port: int) -> bool:
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("0.0.0.0", port))
        except OSError:
            return False
    return True


def test_no_flags_runs_on_the_embedded_default(tmp_path: Path) -> None:
    if not all(port_free(p) for p in (4317, 4318, 9464)):
        pytest.skip("the default ports 4317/4318/9464 are taken on this machine")
    serve = Serve([], tmp_path)
    if len(serve.ports) < 3 and "cannot listen on" in serve.output:
        serve.proc.wait(60)  # another process took one between the look above and the bind
        pytest.skip(f"a default port was taken meanwhile: {serve.output.strip()[-300:]}")
    try:
        assert serve.ports == {"OTLP/gRPC": 4317, "OTLP/HTTP": 4318, "admin": 9464}
        trace_id = new_trace_id()
        reply = requests.post(
            "http://127.0.0.1:4318/v1/traces",
            data=trace_request(simple_spans(2, trace_id)).SerializeToString(),
            headers={"Content-Type": "application/x-protobuf"},
            timeout=10,
        )
        assert reply.status_code == 200
        metrics = requests.get("http://127.0.0.1:9464/metrics", timeout=10).text
        assert 'sextant_receiver_items_accepted_total{protocol="http",signal="traces"} 2.0' in (
            metrics
        )
        assert requests.get("http://127.0.0.1:9464/healthz", timeout=10).json() == {"status": "ok"}
    finally:
        assert serve.stop() == 0
    con = duckdb.connect(str(tmp_path / "sextant-data" / "sextant.duckdb"), read_only=True)
    assert con.execute("SELECT count(*) FROM spans").fetchone() == (2,)


def test_sigkill_with_open_traces_loses_no_trajectory(tmp_path: Path) -> None:
    """Traces still open when the process is killed close, whole, after the next start."""
    from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter

    from tests.support.agents import booking_run, provider_for
    from tests.support.wait import wait_for

    data = ["--data-dir", str(tmp_path / "d")]
    serve = Serve(
        [*EPHEMERAL, *data], tmp_path, env={"SEXTANT_ASSEMBLER__QUIET_PERIOD_SECONDS": "60"}
    )
    provider = provider_for(
        OTLPSpanExporter(endpoint=f"127.0.0.1:{serve.ports['OTLP/gRPC']}", insecure=True)
    )
    finished = [booking_run(provider) for _ in range(3)]
    provider.shutdown()
    # A fourth trace: its child now, its root only after the restart.
    split_id, root_id = new_trace_id(), b"\x01" * 8
    child = {
        "trace_id": split_id,
        "span_id": b"\x02" * 8,
        "parent_span_id": root_id,
        "name": "execute_tool lookup",
        "attributes": {"gen_ai.tool.name": "lookup", "gen_ai.operation.name": "execute_tool"},
    }
    export(serve.ports["OTLP/gRPC"], trace_request([child]).SerializeToString())
    serve.proc.kill()  # SIGKILL: no drain, no final checkpoint
    serve.proc.wait(30)

    fast = {
        "SEXTANT_ASSEMBLER__QUIET_PERIOD_SECONDS": "0.3",
        "SEXTANT_ASSEMBLER__TICK_SECONDS": "0.05",
    }
    again = Serve([*EPHEMERAL, *data], tmp_path, env=fast)
    admin = f"http://127.0.0.1:{again.ports['admin']}"

    def trajectory(trace_id: str):
        reply = requests.get(f"{admin}/api/v1/trajectories/{trace_id}", timeout=5)
        return reply.json() if reply.status_code == 200 else None

    try:
        # open at the kill: from the store, or from the journal if not yet loaded at the kill
        recovered = re.search(r"recovered (\d+) open traces from the store", again.output)
        loaded = re.search(r"loaded (\d+) rows acknowledged before the last stop", again.output)
        assert recovered or loaded, again.output
        for trace_id in finished:
            t = wait_for(lambda trace_id=trace_id: trajectory(trace_id), timeout=20)
            assert (t["steps"], t["tool_calls"], t["status"], t["revision"]) == (6, 2, "ok", 1)
        root = {
            "trace_id": split_id,
            "span_id": root_id,
            "name": "invoke_agent a",
            "attributes": {"gen_ai.operation.name": "invoke_agent"},
        }
        export(again.ports["OTLP/gRPC"], trace_request([root]).SerializeToString())
        t = wait_for(lambda: trajectory(split_id.hex()), timeout=20)
        assert [s["name"] for s in t["steps_detail"]] == ["a", "lookup"]
        assert t["status"] == "ok"
    finally:
        assert again.stop() == 0


def test_worker_processes_die_with_a_killed_main_process(tmp_path: Path) -> None:
    """SIGKILL leaves the main process no chance to stop its pool: the workers notice alone
    (the Python assembly path has them; the native one starts none)."""
    from tests.support.process import children, running
    from tests.support.wait import wait_for

    python = {"SEXTANT_ASSEMBLER__NATIVE": "false"}
    serve = Serve([*EPHEMERAL, "--data-dir", str(tmp_path / "d")], tmp_path, python)
    assert set(serve.ports) == {"OTLP/gRPC", "OTLP/HTTP", "admin"}, serve.output
    workers = wait_for(lambda: len(children(serve.proc.pid)) >= 2 and children(serve.proc.pid))
    serve.proc.kill()
    serve.proc.wait(30)
    wait_for(lambda: not any(running(pid) for pid in workers), timeout=5)
