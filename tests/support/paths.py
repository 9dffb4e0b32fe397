"""Where the test fixtures live on disk."""

from __future__ import annotations

from pathlib import Path

TESTDATA = Path(__file__).parent.parent / "testdata"
ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
