"""Finding the real tools (Prometheus, Alertmanager, promtool, amtool) the tests run."""

from __future__ import annotations

import shutil

import pytest


def binary(*names: str) -> str:
    for name in names:
        found = shutil.which(name)
        if found:
            return found
    pytest.fail(f"{' or '.join(names)} not found: run scripts/test, which installs it")
