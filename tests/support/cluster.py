"""A scale-out cluster for tests: the real OpenTelemetry Collector gateway (built by
scripts/build-gateway) routing by service to `sextant serve` replicas, each a child process on
ports of its own that stay the same across a restart."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import requests
import yaml

from collector.bench.gateway import gateway_config
from collector.config.sections import BUILTIN_RULES
from tests.support.paths import DEPLOY, ROOT
from tests.support.process import Serve
from tests.support.prometheus import free_port, run, stop


def gateway_binary() -> str:
    """The gateway, built once per manifest (minutes the first time, cached after)."""
    done = subprocess.run(
        ["bash", str(ROOT / "scripts/build-gateway")], capture_output=True, text=True, timeout=1800
    )
    assert done.returncode == 0, done.stderr[-4000:]
    return done.stdout.strip().splitlines()[-1]


@dataclass
class Replica:
    name: str
    data: Path
    config: Path
    grpc: int = field(default_factory=free_port)
    http: int = field(default_factory=free_port)
    admin: int = field(default_factory=free_port)
    process: Serve | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.admin}"

    def start(self, cwd: Path) -> None:
        self.process = Serve(
            [
                "--config", str(self.config), "--data-dir", str(self.data),
                "--grpc-addr", f"127.0.0.1:{self.grpc}",
                "--http-addr", f"127.0.0.1:{self.http}",
                "--admin-addr", f"127.0.0.1:{self.admin}",
            ],
            cwd,
        )  # fmt: skip
        assert len(self.process.ports) == 3, self.process.output

    def sql(self, query: str) -> list[dict[str, Any]]:
        reply = requests.post(
            f"{self.url}/api/v1/sql", json={"sql": query, "max_rows": 100000}, timeout=30
        )
        assert reply.status_code == 200, reply.text
        doc = reply.json()
        names = [c["name"] for c in doc["columns"]]
        return [dict(zip(names, row, strict=True)) for row in doc["rows"]]


def replica_config(tmp: Path, name: str, alertmanager: str) -> Path:
    config = {
        "workers": {"processes": 0},
        "assembler": {"quiet_period_seconds": 0.3, "max_trace_age_seconds": 5,
                      "tick_seconds": 0.05},
        "decisions": {"interval_seconds": 0.2, "window_seconds": 300,
                      "resolve_after_seconds": 60},
        "rules": {"paths": [str(BUILTIN_RULES)]},
        "alerts": {"alertmanager": [{"url": alertmanager, "resend_seconds": 1}]},
        "cluster": {"replica": name},
    }  # fmt: skip
    path = tmp / f"{name}.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


class Gateway:
    def __init__(self, binary: str, tmp: Path, replicas: list[Replica]) -> None:
        self.grpc, self.http, health = free_port(), free_port(), free_port()
        shipped = DEPLOY / "gateway/gateway.yaml"
        config = gateway_config(
            shipped, tmp, self.grpc, health, [r.grpc for r in replicas], http=self.http
        )
        self.process = run(
            [binary, "--config", str(config)], f"http://127.0.0.1:{health}/", tmp / "gateway.log"
        )
        self.endpoint = f"127.0.0.1:{self.grpc}"

    def stop(self) -> None:
        stop(self.process)
