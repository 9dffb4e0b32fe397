"""The gateway path measured: OTLP/gRPC from senders of many services, through the
OpenTelemetry Collector gateway (deploy/gateway/gateway.yaml, routing by service), to N
`sextant serve` replicas on this machine; spans/s acknowledged and stored, and the CPU the
gateway and the replicas spent per span (from /proc)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
import orjson
import yaml

from collector.bench.runner import BenchOptions, payload_template
from collector.bench.traces import salted_copy

EXPORT = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"
TEMPLATE_SERVICE = b"travel-desk"  # the template's service.name, replaced by one per sender
TICKS = os.sysconf("SC_CLK_TCK")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def cpu_seconds(pid: int) -> float:
    """User + system CPU of a process and its children, reaped or running (/proc)."""
    total = 0.0
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # gone while we looked
        if stat.parent.name == str(pid):
            total += sum(int(v) for v in fields[11:15]) / TICKS
        elif fields[1] == str(pid):
            total += sum(int(v) for v in fields[11:13]) / TICKS
    return total


@dataclass
class GatewayReport:
    replicas: int
    services: int
    seconds: float = 0.0
    acknowledged: int = 0
    stored: int = 0
    trajectories: int = 0
    caught_up: float = 0.0  # seconds from the start until every run was stored and evaluated
    failed_requests: int = 0
    gateway_cpu: float = 0.0
    replica_cpu: list[float] = field(default_factory=list)
    per_replica: list[int] = field(default_factory=list)

    def render(self) -> str:
        rate = self.acknowledged / self.seconds if self.seconds else 0.0
        per_span = 1e6 / self.acknowledged if self.acknowledged else 0.0
        shares = ", ".join(f"{n:,}" for n in self.per_replica)
        return "\n".join(
            [
                f"gateway -> {self.replicas} replicas, {self.services} services,"
                f" {self.seconds:.0f} s",
                f"acknowledged {self.acknowledged:,} spans ({rate:,.0f} spans/s),"
                f" stored {self.stored:,}, failed requests {self.failed_requests}",
                f"spans per replica: {shares}; {self.trajectories:,} runs evaluated,"
                f" caught up {self.caught_up:.0f} s after the start",
                f"gateway CPU {self.gateway_cpu:.1f} s = {self.gateway_cpu * per_span:.1f} µs/span;"
                f" replicas CPU {sum(self.replica_cpu):.1f} s ="
                f" {sum(self.replica_cpu) * per_span:.1f} µs/span",
            ]
        )


def start_replica(work: Path, name: str) -> tuple[subprocess.Popen[bytes], int, int]:
    grpc_port, admin = free_port(), free_port()
    config = work / f"{name}.yaml"
    config.write_text(yaml.safe_dump({"cluster": {"replica": name}}))
    process = subprocess.Popen(
        [
            sys.executable, "-m", "collector.cli", "serve", "--config", str(config),
            "--data-dir", str(work / name), "--grpc-addr", f"127.0.0.1:{grpc_port}",
            "--http-addr", f"127.0.0.1:{free_port()}", "--admin-addr", f"127.0.0.1:{admin}",
        ],
        stdout=subprocess.DEVNULL,
        stderr=(work / f"{name}.log").open("wb"),
    )  # fmt: skip
    wait_ready(f"http://127.0.0.1:{admin}/readyz", process)
    return process, grpc_port, admin


def wait_ready(url: str, process: subprocess.Popen[bytes], timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"{url}: the process exited with {process.returncode}")
        try:
            with urllib.request.urlopen(url, timeout=1) as reply:
                if reply.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.2)
    raise RuntimeError(f"{url} not ready after {timeout:.0f} s")


def gateway_config(
    shipped: Path,
    work: Path,
    port: int,
    health: int,
    replicas: list[int],
    http: int | None = None,
) -> Path:
    """The shipped gateway configuration on loopback: OTLP/gRPC on `port` (and OTLP/HTTP on
    `http` when given), these replicas' OTLP ports, its queue under `work`, no telemetry of its
    own."""
    doc = yaml.safe_load(shipped.read_text())
    doc["extensions"]["health_check"]["endpoint"] = f"127.0.0.1:{health}"
    doc["extensions"]["file_storage"]["directory"] = str(work / "gateway-queue")
    protocols: dict[str, Any] = {"grpc": {"endpoint": f"127.0.0.1:{port}"}}
    if http is not None:
        protocols["http"] = {"endpoint": f"127.0.0.1:{http}"}
    doc["receivers"]["otlp"]["protocols"] = protocols
    resolver = doc["exporters"]["load_balancing"]["resolver"]
    resolver["static"]["hostnames"] = [f"127.0.0.1:{p}" for p in replicas]
    doc["service"]["telemetry"] = {"metrics": {"level": "none"}}
    path = work / "gateway.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def start_gateway(
    binary: str, work: Path, config: Path, replicas: list[int]
) -> tuple[subprocess.Popen[bytes], int]:
    port, health = free_port(), free_port()
    process = subprocess.Popen(
        [binary, "--config", str(gateway_config(config, work, port, health, replicas))],
        stdout=subprocess.DEVNULL,
        stderr=(work / "gateway.log").open("wb"),
    )
    wait_ready(f"http://127.0.0.1:{health}/", process)
    return process, port


def send(
    endpoint: str,
    template: bytes,
    salt: bytes,
    spans: int,
    until: float,
    report: GatewayReport,
    lock: threading.Lock,
) -> None:
    """One sender's loop; `lock` is every sender's, guarding the report's counts."""
    with grpc.insecure_channel(endpoint) as channel:
        export = channel.unary_unary(EXPORT)
        while time.monotonic() < until:
            try:
                export(salted_copy(template, salt), timeout=30)
            except grpc.RpcError:
                with lock:
                    report.failed_requests += 1
                continue
            with lock:
                report.acknowledged += spans


def stored(admin: int, table: str) -> int:
    doc = orjson.dumps({"sql": f"SELECT count(*) AS n FROM {table}"})
    request = urllib.request.Request(
        f"http://127.0.0.1:{admin}/api/v1/sql", doc, {"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=30) as reply:
        return int(orjson.loads(reply.read())["rows"][0][0])


def caught_up(report: GatewayReport, admins: list[int], spans_per_trace: int) -> None:
    """Wait (up to 5 minutes) until every acknowledged span is stored and every run evaluated."""
    runs = report.acknowledged // spans_per_trace
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        report.per_replica = [stored(a, "spans") for a in admins]
        report.stored = sum(report.per_replica)
        report.trajectories = sum(stored(a, "trajectories") for a in admins)
        if report.stored >= report.acknowledged and report.trajectories >= runs:
            return
        time.sleep(1)


def run_gateway_bench(
    binary: str,
    config: Path,
    replicas: int = 3,
    services: int = 12,
    seconds: float = 20.0,
    spans_per_request: int = 200,
) -> GatewayReport:
    report = GatewayReport(replicas, services)
    options = BenchOptions(spans_per_request=spans_per_request)
    template, salt, spans = payload_template(options)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        started = [start_replica(work, f"sextant-{i}") for i in range(replicas)]
        gateway, port = start_gateway(binary, work, config, [g for _, g, _ in started])
        try:
            cpu0 = cpu_seconds(gateway.pid)
            replica0 = [cpu_seconds(p.pid) for p, _, _ in started]
            begin = time.monotonic()
            until = begin + seconds
            lock = threading.Lock()
            # One sender per service, each service.name as long as the template's (11 bytes),
            # so the protobuf stays valid with the name replaced.
            threads = [
                threading.Thread(
                    target=send,
                    args=(
                        f"127.0.0.1:{port}",
                        template.replace(TEMPLATE_SERVICE, f"svc-{i:07d}".encode()),
                        *(salt, spans, until, report, lock),
                    ),
                )
                for i in range(services)
            ]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            report.seconds = time.monotonic() - begin
            report.gateway_cpu = cpu_seconds(gateway.pid) - cpu0
            # The replicas' CPU once every run is stored and evaluated, their catch-up included.
            caught_up(report, [a for _, _, a in started], options.spans_per_trace)
            report.caught_up = time.monotonic() - begin
            report.replica_cpu = [
                cpu_seconds(p.pid) - c for (p, _, _), c in zip(started, replica0, strict=True)
            ]
        finally:
            gateway.terminate()
            gateway.wait(30)
            for p, _, _ in started:
                p.terminate()
                p.wait(60)
    return report
