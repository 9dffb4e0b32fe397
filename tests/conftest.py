"""Shared fixtures: a real Sextant pipeline on ephemeral loopback ports, and waiting helpers."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from collector.embedded import Embedded, loopback_config, start

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


class RunningServer(Embedded):
    """A real pipeline on loopback ports, with ways to look inside it."""

    def query(self, sql: str, params: list[Any] | None = None) -> list[tuple[Any, ...]]:
        return self.pipeline.database.cursor().execute(sql, params or []).fetchall()

    def query_dicts(self, sql: str, params: list[Any] | None = None) -> list[dict[str, Any]]:
        cursor = self.pipeline.database.cursor().execute(sql, params or [])
        names = [d[0] for d in cursor.description]
        return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]

    def metric(self, name: str, labels: dict[str, str] | None = None) -> float:
        return self.pipeline.registry.get_sample_value(name, labels or {}) or 0.0


def start_server(data_dir: Path, **sections: Any) -> RunningServer:
    """A pipeline on 127.0.0.1 port 0 everywhere, in its own thread and event loop."""
    defaults = {"storage": {"data_dir": str(data_dir)}, "workers": {"processes": 0}}
    merged = {k: {**defaults.get(k, {}), **v} for k, v in sections.items()}
    for key, value in defaults.items():
        merged.setdefault(key, value)
    running = start(loopback_config(**merged))
    return RunningServer(running.pipeline, running.loop, running.thread)


def sextant(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    """Run the `sextant` command in-process: its exit code and everything it printed."""
    from collector import cli

    with pytest.raises(SystemExit) as exited:
        cli.main(list(args))
    out = capsys.readouterr()
    return exited.value.code, out.out + out.err


@pytest.fixture
def server(tmp_path: Path) -> Iterator[RunningServer]:
    running = start_server(tmp_path / "data")
    yield running
    running.stop()
