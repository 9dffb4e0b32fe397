"""Which runs' acknowledged spans the guard waits for: those still in journal frames that are
not loaded, and only those are remembered."""

from __future__ import annotations

import concurrent.futures

import pyarrow as pa
from prometheus_client import CollectorRegistry

from collector.assembler.prices import PriceTable
from collector.config.guard import GuardConfig
from collector.guard.metrics import GuardMetrics
from collector.guard.service import Guard


class Journal:
    """The writer's journal: frames acknowledged, frames loaded."""

    def __init__(self) -> None:
        self.progress = (0, 0)

    def journal_progress(self) -> tuple[int, int]:
        return self.progress

    def settled(self) -> concurrent.futures.Future[None]:
        raise AssertionError("not asked here")


def batch(*trace_ids: str) -> pa.Table:
    return pa.table({"trace_id": list(trace_ids)})


def test_a_run_is_waited_for_until_its_frame_is_loaded_and_then_let_go() -> None:
    journal = Journal()
    metrics = GuardMetrics(CollectorRegistry())
    guard = Guard(GuardConfig(), None, journal, None, None, None, metrics, PriceTable({}))  # type: ignore[arg-type]
    try:
        journal.progress = (5, 3)
        guard.acknowledged(batch("a", "b", "a"), "grpc")
        assert not guard._loaded("a") and not guard._loaded("b")
        journal.progress = (6, 5)  # frame 5 loaded, 6 acknowledged
        assert guard._loaded("a")
        guard.acknowledged(batch("c"), "http")
        assert list(guard._acked) == ["c"] and not guard._loaded("c")
        journal.progress = (7, 7)
        guard.acknowledged(batch("d"), "http")
        assert not guard._acked and guard._loaded("d")
    finally:
        guard._threads.shutdown()
