"""SIGKILL while exporters are sending: every span acknowledged before the kill is stored after
the restart (some only in the ingest journal at the kill, loaded at the start), and every
acknowledged trace is assembled into its trajectory."""

from __future__ import annotations

import threading
from pathlib import Path

import grpc
import requests

from tests.support.otlp import TRACE_EXPORT, new_trace_id, simple_spans, trace_request
from tests.support.process import EPHEMERAL, Serve
from tests.support.wait import wait_for

EXPORTERS = 8
SPANS_PER_TRACE = 10


def send_until(port: int, stop: threading.Event, acked: list[bytes]) -> None:
    """Whole 10-span traces, one request each, until `stop`; the ids of those acknowledged."""
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        export = channel.unary_unary(TRACE_EXPORT)
        while not stop.is_set():
            trace_id = new_trace_id()
            body = trace_request(simple_spans(SPANS_PER_TRACE, trace_id)).SerializeToString()
            try:
                export(body, timeout=5)
            except grpc.RpcError:
                continue  # refused, or the server is gone: not acknowledged
            acked.append(trace_id)


def test_acknowledged_spans_survive_a_kill_under_load_and_are_assembled(tmp_path: Path) -> None:
    data = ["--data-dir", str(tmp_path / "d")]
    slow = {"SEXTANT_ASSEMBLER__QUIET_PERIOD_SECONDS": "30"}  # many traces open at the kill
    serve = Serve([*EPHEMERAL, *data], tmp_path, env=slow)
    stop = threading.Event()
    acked: list[list[bytes]] = [[] for _ in range(EXPORTERS)]
    senders = [
        threading.Thread(target=send_until, args=(serve.ports["OTLP/gRPC"], stop, mine))
        for mine in acked
    ]
    for sender in senders:
        sender.start()
    wait_for(lambda: sum(map(len, acked)) >= 200, timeout=60)
    serve.proc.kill()  # SIGKILL mid-load: no drain, no final checkpoint
    serve.proc.wait(30)
    stop.set()
    for sender in senders:
        sender.join(30)
    acknowledged = {trace_id.hex() for mine in acked for trace_id in mine}

    fast = {
        "SEXTANT_ASSEMBLER__QUIET_PERIOD_SECONDS": "0.3",
        "SEXTANT_ASSEMBLER__TICK_SECONDS": "0.05",
    }
    again = Serve([*EPHEMERAL, *data], tmp_path, env=fast)
    sql = f"http://127.0.0.1:{again.ports['admin']}/api/v1/sql"

    def rows(query: str) -> list[list[object]]:
        reply = requests.post(sql, json={"sql": query, "max_rows": 100_000}, timeout=30)
        reply.raise_for_status()
        return reply.json()["rows"]

    def unassembled() -> set[str]:
        query = "SELECT DISTINCT trace_id FROM trajectories WHERE is_current"
        return acknowledged - {row[0] for row in rows(query)}

    try:
        counts = dict(rows("SELECT trace_id, count(*) FROM spans GROUP BY trace_id"))
        assert {t for t in acknowledged if counts.get(t) != SPANS_PER_TRACE} == set()
        wait_for(lambda: not unassembled(), timeout=60)
    finally:
        assert again.stop() == 0
