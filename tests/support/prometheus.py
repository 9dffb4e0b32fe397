"""Real Prometheus and Alertmanager processes, and the alert sink, on free loopback ports."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import requests

from tests.support.binaries import binary
from tests.support.wait import wait_for


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run(
    args: list[str], ready_url: str, log: Path, stderr: int = subprocess.STDOUT
) -> subprocess.Popen:
    """Start `args` with its output in `log` (and its errors too, unless `stderr` says
    otherwise), and wait until `ready_url` answers 200."""
    out = log.open("wb")
    process = subprocess.Popen(args, stdout=out, stderr=stderr)

    def ready() -> bool:
        if process.poll() is not None:
            raise AssertionError(f"{args[0]} exited: {log.read_text()[-2000:]}")
        try:
            return requests.get(ready_url, timeout=1).status_code == 200
        except requests.ConnectionError:
            return False

    wait_for(ready, timeout=30, interval=0.2)
    return process


def stop(process: subprocess.Popen) -> None:
    process.terminate()
    try:
        process.wait(10)
    except subprocess.TimeoutExpired:
        process.kill()


@dataclass
class Prometheus:
    url: str

    def query(self, expr: str) -> list[dict[str, Any]]:
        reply = requests.get(f"{self.url}/api/v1/query", params={"query": expr}, timeout=5)
        body = reply.json()
        assert body["status"] == "success", body
        return body["data"]["result"]

    def values(self, expr: str) -> list[float]:
        return [float(r["value"][1]) for r in self.query(expr)]

    def alerts(self) -> list[dict[str, Any]]:
        return requests.get(f"{self.url}/api/v1/alerts", timeout=5).json()["data"]["alerts"]


@contextmanager
def prometheus(tmp: Path, sextant: str, rule_files: Sequence[Path] = ()) -> Iterator[Prometheus]:
    """Real Prometheus scraping the admin address `sextant` (host:port) as job `sextant` every
    second and evaluating `rule_files` every second."""
    port = free_port()
    config = tmp / "prometheus.yml"
    config.write_text(
        json.dumps(
            {
                "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
                "rule_files": [str(p) for p in rule_files],
                "scrape_configs": [
                    {"job_name": "sextant", "static_configs": [{"targets": [sextant]}]}
                ],
            }
        )
    )
    url = f"http://127.0.0.1:{port}"
    process = run(
        [
            binary("prometheus"),
            f"--config.file={config}",
            f"--storage.tsdb.path={tmp / 'prom-data'}",
            f"--web.listen-address=127.0.0.1:{port}",
        ],
        f"{url}/-/ready",
        tmp / "prometheus.log",
    )
    try:
        yield Prometheus(url)
    finally:
        stop(process)


@contextmanager
def alertmanager(config: Path, tmp: Path) -> Iterator[str]:
    """The real Alertmanager on `config`, alone (no cluster) on a free loopback port: its URL."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    process = run(
        [
            binary("prometheus-alertmanager", "alertmanager"),
            f"--config.file={config}",
            f"--storage.path={tmp / 'am-data'}",
            f"--web.listen-address=127.0.0.1:{port}",
            "--cluster.listen-address=",
        ],
        f"{url}/-/ready",
        tmp / "alertmanager.log",
    )
    try:
        yield url
    finally:
        stop(process)


@dataclass
class Sink:
    """A running `sextant alerts sink`: its base URL and what it printed, one JSON line each."""

    url: str
    out: Path
    process: subprocess.Popen

    def received(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.out.read_text().splitlines() if line]


@contextmanager
def alert_sink(tmp: Path) -> Iterator[Sink]:
    """`sextant alerts sink` in its own process on a free loopback port."""
    port = free_port()
    out = tmp / "sink.jsonl"
    url = f"http://127.0.0.1:{port}"
    args = [sys.executable, "-m", "collector.cli", "alerts", "sink", "--addr", f"127.0.0.1:{port}"]
    # its stdout is what it received, one JSON line each: nothing else may go there
    process = run(args, url, out, stderr=subprocess.DEVNULL)
    try:
        yield Sink(url, out, process)
    finally:
        stop(process)
