"""A fresh store of hand-written runs for each drift test."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.store import RunStore


@pytest.fixture
def store(tmp_path: Path) -> Iterator[RunStore]:
    runs = RunStore(tmp_path / "sextant.duckdb")
    yield runs
    runs.close()
