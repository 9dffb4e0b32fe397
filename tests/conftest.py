"""Shared fixtures: a real Sextant pipeline on ephemeral loopback ports, and waiting helpers."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from collector.config import load_config
from collector.pipeline import Pipeline

TESTDATA = Path(__file__).parent / "testdata"


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--regen-golden",
        action="store_true",
        help="rewrite tests/testdata/**/*.golden.jsonl from the current normalizer",
    )


def wait_for(predicate: Callable[[], Any], timeout: float = 10.0, interval: float = 0.02) -> Any:
    """Poll until `predicate` returns something truthy; fail with its last value at the deadline."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout}s (last value: {value!r})")
        time.sleep(interval)


@dataclass
class RunningServer:
    pipeline: Pipeline
    loop: asyncio.AbstractEventLoop
    thread: threading.Thread

    @property
    def grpc_endpoint(self) -> str:
        return f"127.0.0.1:{self.pipeline.grpc.port}"

    @property
    def http_url(self) -> str:
        return f"http://127.0.0.1:{self.pipeline.http.port}"

    @property
    def admin_url(self) -> str:
        return f"http://127.0.0.1:{self.pipeline.admin.port}"

    def query(self, sql: str, params: list[Any] | None = None) -> list[tuple[Any, ...]]:
        return self.pipeline.database.cursor().execute(sql, params or []).fetchall()

    def query_dicts(self, sql: str, params: list[Any] | None = None) -> list[dict[str, Any]]:
        cursor = self.pipeline.database.cursor().execute(sql, params or [])
        names = [d[0] for d in cursor.description]
        return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]

    def metric(self, name: str, labels: dict[str, str] | None = None) -> float:
        return self.pipeline.registry.get_sample_value(name, labels or {}) or 0.0

    def stop(self) -> None:
        if self.thread.is_alive():
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(30)


def start_server(data_dir: Path, **sections: Any) -> RunningServer:
    """A pipeline on 127.0.0.1 port 0 everywhere, in its own thread and event loop."""
    overrides: dict[str, Any] = {
        "grpc": {"addr": "127.0.0.1:0"},
        "http": {"addr": "127.0.0.1:0"},
        "admin": {"addr": "127.0.0.1:0"},
        "storage": {"data_dir": str(data_dir)},
        "workers": {"processes": 0},
    }
    for key, value in sections.items():
        overrides[key] = {**overrides.get(key, {}), **value}
    config = load_config(None, environ={}, overrides=overrides)
    started = threading.Event()
    box: dict[str, Any] = {}

    def run() -> None:
        loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
        try:
            pipeline = Pipeline(config)
            box["pipeline"], box["loop"] = pipeline, loop
            loop.run_until_complete(pipeline.start())
        except BaseException as exc:
            box["error"] = exc
            started.set()
            loop.close()
            return
        started.set()
        loop.run_forever()
        loop.run_until_complete(pipeline.shutdown())
        loop.close()

    thread = threading.Thread(target=run, name="sextant-test-server", daemon=True)
    thread.start()
    started.wait(60)
    if "error" in box:
        raise box["error"]
    return RunningServer(box["pipeline"], box["loop"], thread)


@pytest.fixture
def server(tmp_path: Path) -> Iterator[RunningServer]:
    running = start_server(tmp_path / "data")
    yield running
    running.stop()
