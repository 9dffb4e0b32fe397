"""Shared fixtures: servers built by tests/support/server.py, each stopped when its test ends."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.server import RunningServer, serve, serve_deciding, serve_shipped_packs


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--regen-golden",
        action="store_true",
        help="rewrite tests/testdata/**/*.golden.jsonl from the current normalizer",
    )


@pytest.fixture
def server(tmp_path: Path) -> Iterator[RunningServer]:
    """A server with the default config: no packs, trajectories closed at the default pace."""
    running = serve(tmp_path)
    yield running
    running.stop()


@pytest.fixture
def evaluating_server(tmp_path: Path) -> Iterator[RunningServer]:
    """A server evaluating a copy of the shipped packs (`rules_dir`), reloaded every 0.1 s."""
    running = serve_shipped_packs(tmp_path)
    yield running
    running.stop()


@pytest.fixture
def deciding_server(tmp_path: Path) -> Iterator[RunningServer]:
    """`evaluating_server` that also takes decisions every 0.1 s."""
    running = serve_deciding(tmp_path)
    yield running
    running.stop()
