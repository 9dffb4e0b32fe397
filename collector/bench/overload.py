"""Overload: a `sextant serve` process offered twice what it sustains, and what it does about it.

The server runs as a child process (its own GIL and workers, as deployed); the load comes from
`collector.bench.runner` in this process, open loop at the offered rate with enough threads that
a slow answer does not slow the offer. Measured: the share of requests refused retryably, the
latency of the answers given, the server's peak RSS, whether every acknowledged span is in the
store, and how long after the load stops a single export is answered quickly again.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import duckdb

from collector.bench.runner import BenchOptions, BenchReport, run_bench

QUICK_SECONDS = 0.5  # an export answered within this is "quick again"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Server:
    """`sextant serve` on free loopback ports with `ingest.max_wait_seconds` as given."""

    data: Path
    max_wait: float
    grpc_port: int = field(default_factory=free_port)
    peak_rss_mib: float = 0.0

    def __post_init__(self) -> None:
        config = self.data / "sextant.yaml"
        config.write_text(f"ingest: {{max_wait_seconds: {self.max_wait}}}\n")
        args = ["--config", str(config), "--data-dir", str(self.data / "d")]
        for flag, port in (("grpc", self.grpc_port), ("http", free_port()), ("admin", free_port())):
            args += [f"--{flag}-addr", f"127.0.0.1:{port}"]
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "collector.cli", "serve", *args], stderr=subprocess.DEVNULL
        )
        self._watching = True
        threading.Thread(target=self._watch_rss, daemon=True).start()
        wait_for_port(self.grpc_port)

    def _watch_rss(self) -> None:
        status = Path(f"/proc/{self.proc.pid}/status")
        while self._watching and self.proc.poll() is None:
            for line in status.read_text().splitlines():
                if line.startswith("VmRSS:"):
                    self.peak_rss_mib = max(self.peak_rss_mib, int(line.split()[1]) / 1024)
            time.sleep(0.2)

    def stop(self) -> int:
        self._watching = False
        self.proc.terminate()
        return self.proc.wait(60)

    def stored_spans(self) -> int:
        con = duckdb.connect(str(self.data / "d" / "sextant.duckdb"), read_only=True)
        try:
            row = con.execute("SELECT count(*) FROM spans").fetchone()
            return int(row[0]) if row else 0
        finally:
            con.close()


def wait_for_port(port: int, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.1)
    raise RuntimeError(f"the server did not listen on {port}")


@dataclass
class OverloadReport:
    max_wait: float
    sustained: BenchReport
    overload: BenchReport
    peak_rss_mib: float
    acknowledged: int
    stored: int
    recovery_seconds: float
    exit_code: int

    @property
    def refused_share(self) -> float:
        sent = self.overload.requests_ok + sum(self.overload.errors.values())
        refused = self.overload.errors.get("gRPC RESOURCE_EXHAUSTED", 0)
        return refused / sent if sent else 0.0


def recovery(endpoint: str, timeout: float = 180.0) -> tuple[float, int]:
    """Seconds until one small export is answered within QUICK_SECONDS, and the spans the
    probes got acknowledged on the way."""
    started = time.monotonic()
    probe = BenchOptions(endpoint=endpoint, concurrency=1, traces=1, spans_per_request=10)
    accepted = 0
    while time.monotonic() - started < timeout:
        report = run_bench(probe)
        accepted += report.spans_accepted
        if report.requests_ok and report.percentile(50) < QUICK_SECONDS:
            return time.monotonic() - started, accepted
        time.sleep(0.25)
    return float("inf"), accepted


def run_overload(max_wait: float, seconds: float, factor: float = 2.0) -> OverloadReport:
    with tempfile.TemporaryDirectory() as tmp:
        server = Server(Path(tmp), max_wait)
        endpoint = f"127.0.0.1:{server.grpc_port}"
        base = BenchOptions(endpoint=endpoint, spans_per_request=200)
        sustained = run_bench(BenchOptions(**{**base.__dict__, "concurrency": 4, "duration": 15.0}))
        rate = factor * sustained.spans_accepted / sustained.elapsed
        overload = run_bench(
            BenchOptions(**{**base.__dict__, "concurrency": 64, "duration": seconds, "rate": rate})
        )
        recovered, probed = recovery(endpoint)
        code = server.stop()
        acknowledged = sustained.spans_accepted + overload.spans_accepted + probed
        return OverloadReport(
            max_wait=max_wait,
            sustained=sustained,
            overload=overload,
            peak_rss_mib=server.peak_rss_mib,
            acknowledged=acknowledged,
            stored=server.stored_spans(),
            recovery_seconds=recovered,
            exit_code=code,
        )
