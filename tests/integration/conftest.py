"""Fixtures of the console's browser tests: one Chromium per test module, and a collector whose
support-desk target is QUARANTINEd."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser

from tests.support.admin import firing, trajectory
from tests.support.agents import support_run
from tests.support.browser import browser
from tests.support.server import RunningServer, serve_deciding


@pytest.fixture(scope="module")
def chromium() -> Iterator[Browser]:
    with browser() as launched:
        yield launched


@pytest.fixture
def quarantined(tmp_path: Path) -> Iterator[RunningServer]:
    """A collector whose support-desk target is QUARANTINEd by a run that skipped approval,
    after one that asked first."""
    server = serve_deciding(tmp_path)
    try:
        trajectory(server, support_run(server, approve=True))
        trajectory(server, support_run(server, approve=False))
        firing(server, "QUARANTINE")
        yield server
    finally:
        server.stop()
