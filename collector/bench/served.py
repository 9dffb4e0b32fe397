"""The end-to-end benchmark's processes: `sextant serve` (ingest only, or as shipped) and
`sextant bench` driving it, each a child process with its own GIL, as deployed.

While the collector runs, it is watched through its own counters (`/metrics`), not queries on
its store (which would cost its CPU and take DuckDB's one-writer lock); its final counts are
read from the file once it stopped.
"""

from __future__ import annotations

import math
import os
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from collections import deque
from dataclasses import dataclass
from pathlib import Path

import duckdb

from collector.bench.figures import has_sample, sample_value
from collector.bench.stages import process_seconds
from collector.cli.bench import SENDING

# Ingest alone: nothing assembled, so nothing evaluated; no packs and no drift rounds either.
INGEST_ONLY = "assembler: {enabled: false}\nrules: {paths: []}\ndrift: {enabled: false}\n"
MODES = {"ingest": INGEST_ONLY, "full": ""}  # full: the defaults, the shipped packs
LISTEN = re.compile(r"(OTLP/gRPC|OTLP/HTTP|admin) listening on [\d.]+:(\d+)")
UNCOVERED = """
SELECT count(*) FROM (SELECT trace_id, max(received_at) AS last FROM spans GROUP BY 1) s
LEFT JOIN (SELECT trace_id, max(last_received_at) AS covered FROM trajectories GROUP BY 1) t
  USING (trace_id)
WHERE t.covered IS NULL OR s.last > t.covered
"""


def command(*args: str) -> list[str]:
    return [sys.executable, "-m", "collector.cli", *args]


class Served:
    """A fresh `sextant serve` on loopback ports chosen by the system."""

    def __init__(self, data: Path, config: str) -> None:
        self.data = data
        path = data / "sextant.yaml"
        path.write_text(config or "{}\n")
        addresses = [f"--{f}-addr=127.0.0.1:0" for f in ("grpc", "http", "admin")]
        self.proc = subprocess.Popen(
            command("serve", "--config", str(path), "--data-dir", str(data / "d"), *addresses),
            stderr=subprocess.PIPE,
            text=True,
        )
        self.log: deque[str] = deque(maxlen=20)  # its last lines, for an error message
        self.ports = self._ports()
        threading.Thread(target=self._drain, daemon=True).start()

    @property
    def pid(self) -> int:
        return self.proc.pid

    def _ports(self) -> dict[str, int]:
        ports: dict[str, int] = {}
        assert self.proc.stderr is not None
        while len(ports) < 3:
            line = self.proc.stderr.readline()
            if not line:
                raise SystemExit("sextant serve did not start:\n" + "".join(self.log))
            self.log.append(line)
            if m := LISTEN.search(line):
                ports[m.group(1)] = int(m.group(2))
        return ports

    def _drain(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.log.append(line)

    def endpoint(self, protocol: str) -> str:
        if protocol == "grpc":
            return f"127.0.0.1:{self.ports['OTLP/gRPC']}"
        return f"http://127.0.0.1:{self.ports['OTLP/HTTP']}/v1/traces"

    def metrics(self) -> str:
        url = f"http://127.0.0.1:{self.ports['admin']}/metrics"
        with urllib.request.urlopen(url, timeout=30) as reply:
            return str(reply.read().decode())

    def stop(self) -> int:
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(120)

    def store(self) -> StoreCounts:
        """What the stopped collector stored, read from the file."""
        con = duckdb.connect(str(self.data / "d" / "sextant.duckdb"), read_only=True)
        try:
            one = [
                int(row[0]) if (row := con.execute(q).fetchone()) else 0
                for q in (
                    "SELECT count(*) FROM spans",
                    "SELECT count(DISTINCT trace_id) FROM spans",
                    "SELECT count(*) FROM trajectories",
                    "SELECT count(*) FROM results",
                    UNCOVERED,
                )
            ]
        finally:
            con.close()
        return StoreCounts(*one)


@dataclass(frozen=True)
class StoreCounts:
    spans: int
    traces: int
    trajectories: int
    results: int
    uncovered: int  # traces whose latest spans no trajectory covers


PENDING = "sextant_assembler_pending_traces"
NOTED = "sextant_assembler_spans_total"
ACCEPTED = "sextant_receiver_items_accepted_total"


def assembled(metrics: str) -> bool:
    """From one scrape of the collector's /metrics: every span it acknowledged has reached the
    assembler, and every trace the assembler noted has its current trajectory and results
    stored (they are stored in the same commit). A collector without these series never is.

    Both, because acknowledged spans may still be on their way to the store (the journal
    acknowledges first): no trace pending, counted before they are loaded, is not caught up.
    """
    if not has_sample(metrics, PENDING) or not has_sample(metrics, NOTED):
        return False
    accepted = sample_value(metrics, ACCEPTED, signal="traces")
    return sample_value(metrics, NOTED) >= accepted and sample_value(metrics, PENDING) == 0


CLOSED = "sextant_assembler_traces_closed_total"


def share_assembled(metrics: str) -> float:
    """From one scrape: the share of the traces acknowledged so far that have their trajectory
    and results stored, once every acknowledged span has reached the assembler (0 before: the
    traces of spans still on their way are not counted yet)."""
    if not has_sample(metrics, PENDING) or not has_sample(metrics, NOTED):
        return 0.0
    if sample_value(metrics, NOTED) < sample_value(metrics, ACCEPTED, signal="traces"):
        return 0.0
    closed = sum(
        sample_value(metrics, CLOSED, reason=reason)
        for reason in ("complete", "incomplete_timeout", "incomplete_bound")
    )
    pending = sample_value(metrics, PENDING)
    return closed / (closed + pending) if closed + pending else 1.0


def caught_up(
    served: Served, stopped_at: float, timeout: float, every: float = 0.5
) -> tuple[float, float]:
    """Seconds after the load stopped (`stopped_at`, monotonic) until 99 % of the traces had
    their trajectory and results, and until the collector's own counters say it is
    `assembled`; inf if not within `timeout`. A scrape every `every` s: the collector's CPU it
    costs (its `admin` stage) is small next to a query over the store."""
    most = float("inf")
    while time.monotonic() - stopped_at < timeout:
        metrics = served.metrics()
        if math.isinf(most) and share_assembled(metrics) >= 0.99:
            most = time.monotonic() - stopped_at
        if assembled(metrics):
            return min(most, time.monotonic() - stopped_at), time.monotonic() - stopped_at
        time.sleep(every)
    return most, float("inf")


class Load:
    """`sextant bench` as a child process: `started()` returns once it sends; `finish()` waits
    for its end and returns its report (stdout) and the CPU seconds it used since it started
    sending."""

    def __init__(self, *args: str) -> None:
        self.proc = subprocess.Popen(
            command("bench", *args), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        self.errors: list[str] = []

    def started(self) -> float:
        """Blocks until the load generator sends; its CPU seconds so far (its start-up)."""
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            if line.startswith(SENDING):
                threading.Thread(target=self._drain, daemon=True).start()
                return process_seconds(self.proc.pid)
            self.errors.append(line)
        raise SystemExit("sextant bench did not start:\n" + "".join(self.errors))

    def _drain(self) -> None:
        assert self.proc.stderr is not None
        self.errors += list(self.proc.stderr)

    def finish(self) -> tuple[str, float]:
        """(its report, CPU seconds in all): from the kernel's account of the ended process."""
        assert self.proc.stdout is not None
        out = self.proc.stdout.read()
        _, status, usage = os.wait4(self.proc.pid, 0)
        self.proc.returncode = os.waitstatus_to_exitcode(status)
        if self.proc.returncode:
            raise SystemExit("sextant bench failed:\n" + out + "".join(self.errors))
        return out, usage.ru_utime + usage.ru_stime
