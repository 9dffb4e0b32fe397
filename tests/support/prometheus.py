"""Real Prometheus and Alertmanager processes, and the alert sink, on free loopback ports.

Each binds port 0 and the test reads the port it got from its log: a port found free by the test
and handed to the child could be bound by another process in between (tests run side by side).
"""

from __future__ import annotations

import json
import re
import socket
import subprocess
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import requests

from tests.support.binaries import binary
from tests.support.wait import wait_for

# How Prometheus and Alertmanager (their web toolkit) say which address they bound.
LISTENING = re.compile(r'msg="Listening on" address=127\.0\.0\.1:(\d+)')
# How `sextant alerts sink` says it.
SINK_LISTENING = re.compile(r"alert sink listening on 127\.0\.0\.1:(\d+)")


def free_port() -> int:
    """A port free now, for a process that must keep its port across a restart; anything else
    binds port 0 and says which port it got."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run(
    args: list[str],
    ready_url: str,
    log: Path,
    stderr: int = subprocess.STDOUT,
) -> subprocess.Popen:
    """Start `args` with its output in `log` (and its errors too, unless `stderr` says
    otherwise), and wait until `ready_url` answers 200."""
    out = log.open("wb")
    process = subprocess.Popen(args, stdout=out, stderr=stderr)
    wait_ready(process, args[0], lambda: ready_url, log)
    return process


def run_on_port_0(
    args: list[str],
    ready_path: str,
    log: Path,
    listening: re.Pattern[str] = LISTENING,
    errors: Path | None = None,
) -> tuple[subprocess.Popen, str]:
    """Start `args`, told to listen on 127.0.0.1:0, with its output in `log` (its errors in
    `errors` when given, else in `log` too); wait until it says which port it bound (the
    `listening` line of `errors` or `log`) and `ready_path` answers 200 there. The process and
    its base URL."""
    out = log.open("wb")
    err = errors.open("wb") if errors is not None else None
    process = subprocess.Popen(args, stdout=out, stderr=err or subprocess.STDOUT)
    said = errors if errors is not None else log

    def base_url() -> str | None:
        found = listening.search(said.read_text(errors="replace"))
        return f"http://127.0.0.1:{found.group(1)}" if found else None

    url = wait_ready(process, args[0], base_url, said, ready_path)
    return process, url


def wait_ready(
    process: subprocess.Popen,
    name: str,
    base_url: Callable[[], str | None],
    log: Path,
    ready_path: str = "",
) -> str:
    """The base URL once `process` answers 200 on it (at `ready_path`); fails if it exits."""

    def ready() -> str | None:
        if process.poll() is not None:
            raise AssertionError(f"{name} exited: {log.read_text(errors='replace')[-2000:]}")
        url = base_url()
        if url is None:
            return None
        try:
            return url if requests.get(url + ready_path, timeout=1).status_code == 200 else None
        except requests.ConnectionError:
            return None

    return wait_for(ready, timeout=30, interval=0.2)


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
def prometheus(
    tmp: Path, sextant: str, rule_files: Sequence[Path] = (), alertmanager: str | None = None
) -> Iterator[Prometheus]:
    """Real Prometheus scraping the admin address `sextant` (host:port) as job `sextant` every
    second and evaluating `rule_files` every second, sending its alerts to the `alertmanager`
    URL when given."""
    config = tmp / "prometheus.yml"
    settings: dict[str, Any] = {
        "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
        "rule_files": [str(p) for p in rule_files],
        "scrape_configs": [{"job_name": "sextant", "static_configs": [{"targets": [sextant]}]}],
    }
    if alertmanager is not None:
        target = alertmanager.removeprefix("http://")
        settings["alerting"] = {"alertmanagers": [{"static_configs": [{"targets": [target]}]}]}
    config.write_text(json.dumps(settings))
    process, url = run_on_port_0(
        [
            binary("prometheus"),
            f"--config.file={config}",
            f"--storage.tsdb.path={tmp / 'prom-data'}",
            "--web.listen-address=127.0.0.1:0",
        ],
        "/-/ready",
        tmp / "prometheus.log",
    )
    try:
        yield Prometheus(url)
    finally:
        stop(process)


@contextmanager
def alertmanager(config: Path, tmp: Path) -> Iterator[str]:
    """The real Alertmanager on `config`, alone (no cluster) on a free loopback port: its URL."""
    process, url = run_on_port_0(
        [
            binary("prometheus-alertmanager", "alertmanager"),
            f"--config.file={config}",
            f"--storage.path={tmp / 'am-data'}",
            "--web.listen-address=127.0.0.1:0",
            "--cluster.listen-address=",
        ],
        "/-/ready",
        tmp / "alertmanager.log",
    )
    try:
        yield url
    finally:
        stop(process)


@contextmanager
def alertmanager_to(hook: str, tmp: Path) -> Iterator[str]:
    """The real Alertmanager sending every alert, and its resolution, to the webhook URL `hook`
    at once (no grouping wait): its URL."""
    config = tmp / "alertmanager.yml"
    route = {
        "receiver": "hook",
        "group_by": ["..."],
        "group_wait": "0s",
        "group_interval": "1s",
        "repeat_interval": "1h",
    }
    receiver = {"name": "hook", "webhook_configs": [{"url": hook, "send_resolved": True}]}
    config.write_text(json.dumps({"route": route, "receivers": [receiver]}))
    with alertmanager(config, tmp) as url:
        yield url


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
    out = tmp / "sink.jsonl"
    args = [sys.executable, "-m", "collector.cli", "alerts", "sink", "--addr", "127.0.0.1:0"]
    # its stdout is what it received, one JSON line each: nothing else may go there
    errors = tmp / "sink.log"
    process, url = run_on_port_0(args, "", out, SINK_LISTENING, errors)
    try:
        yield Sink(url, out, process)
    finally:
        stop(process)
