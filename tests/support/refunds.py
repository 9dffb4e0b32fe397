"""The refunds incident: pack v1 (passes a refund without approval) and the fixed v2, and a store
holding one incident run and one known-good run."""

from __future__ import annotations

from pathlib import Path

from tests.support.admin import trajectory
from tests.support.agents import refund_run
from tests.support.paths import TESTDATA
from tests.support.server import FAST, RunningServer, serve

REPLAY = TESTDATA / "replay"
V1, V2 = REPLAY / "refunds-v1.yaml", REPLAY / "refunds-v2.yaml"


def refund_store(tmp: Path) -> tuple[RunningServer, str, str]:
    """A collector under refunds v1 with an incident run and a known-good run (both pass)."""
    server = serve(tmp, {"refunds": V1}, assembler=FAST)
    bad = refund_run(server, approve=False)
    good = refund_run(server, approve=True)
    for trace_id in (bad, good):
        assert trajectory(server, trace_id)["verdict"] == "pass"
    return server, bad, good
