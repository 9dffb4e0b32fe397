"""Disk full: the store refuses writes (503, nothing acknowledged is lost), `/readyz` says why,
and once space returns the same process takes data again and stops cleanly."""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import duckdb
import grpc
import pytest
import requests

from tests.support.otlp import TRACE_EXPORT, new_trace_id, simple_spans, trace_request
from tests.support.process import EPHEMERAL, Serve
from tests.support.wait import wait_for

FS_MB = 24
FILLER_BYTES = 16_000_000  # removed to give the store its space back: twice what it filled
# Each span carries this many random bytes (as hex): the disk fills after a bounded number of
# exports whatever the store's compression and the checkpoints' timing make of plain spans.
PAYLOAD_BYTES = 1024


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A tmpfs of FS_MB MiB (needs root, as CI runs)."""
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    mount = tmp_path / "disk"
    mount.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={FS_MB}m", "tmpfs", str(mount)],
        capture_output=True,
        text=True,
    )
    if mounted.returncode != 0:  # a container without the right to mount
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def payload_spans(trace_id: bytes) -> list[dict]:
    """Fifty spans of one trace, each with an incompressible attribute."""
    spans = simple_spans(50, trace_id)
    for span in spans:
        span["attributes"] = {"payload": os.urandom(PAYLOAD_BYTES).hex()}
    return spans


def test_a_full_disk_refuses_then_recovers_without_losing_an_acknowledged_span(
    small_disk: Path,
) -> None:
    (small_disk / "filler").write_bytes(b"\0" * FILLER_BYTES)
    serve = Serve([*EPHEMERAL, "--data-dir", str(small_disk / "d")], small_disk)
    acked: list[str] = []
    try:
        admin = f"http://127.0.0.1:{serve.ports['admin']}"
        with grpc.insecure_channel(f"127.0.0.1:{serve.ports['OTLP/gRPC']}") as channel:
            call = channel.unary_unary(TRACE_EXPORT)

            def send() -> grpc.StatusCode | None:
                trace_id = new_trace_id()
                try:
                    call(trace_request(payload_spans(trace_id)).SerializeToString(), timeout=10)
                except grpc.RpcError as exc:
                    return exc.code()
                acked.append(trace_id.hex())
                return None

            refused = None
            for _ in range(1000):  # the 8 MB left are full of payload within a hundred
                if (refused := send()) is not None:
                    break
            assert refused == grpc.StatusCode.UNAVAILABLE, "the disk never filled"
            ready = requests.get(f"{admin}/readyz", timeout=5)
            assert ready.status_code == 503
            reason = ready.json()["reason"]
            assert "No space left on device" in reason
            assert re.search(r"the journal holds \d+\.\d MiB; the acknowledged requests", reason)

            (small_disk / "filler").unlink()
            # the same process loads what it had acknowledged, is ready and takes data again
            wait_for(lambda: requests.get(f"{admin}/readyz", timeout=5).status_code == 200)
            after = [send() for _ in range(5)]
            assert after == [None] * 5, after
    finally:
        serve.stop()  # also when an assertion failed: never leave a server running
    assert serve.proc.returncode == 0, serve.output[-3000:]
    assert "stopped; store closed cleanly" in serve.output
    con = duckdb.connect(str(small_disk / "d" / "sextant.duckdb"), read_only=True)
    stored = dict(con.execute("SELECT trace_id, count(*) FROM spans GROUP BY 1").fetchall())
    assert all(stored.get(t) == 50 for t in acked)
    con.close()
