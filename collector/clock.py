"""Time as a dependency: the system clock, and a clock tests move by hand."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Protocol


def naive_utc(seconds: float) -> datetime:
    """Wall time as the store keeps it: naive UTC (DuckDB TIMESTAMP, µs)."""
    return datetime.fromtimestamp(seconds, UTC).replace(tzinfo=None)


class Clock(Protocol):
    def monotonic(self) -> float: ...

    def wall(self) -> float: ...

    def now(self) -> datetime:
        """Wall time as naive UTC, the way every table stores it."""
        ...


class SystemClock:
    def monotonic(self) -> float:
        return time.monotonic()

    def wall(self) -> float:
        return time.time()

    def now(self) -> datetime:
        return naive_utc(self.wall())


class FakeClock:
    """Starts at an arbitrary instant and moves only when `advance` is called."""

    def __init__(self, wall: float = 1_800_000_000.0) -> None:
        self._mono = 1000.0
        self._wall = wall

    def monotonic(self) -> float:
        return self._mono

    def wall(self) -> float:
        return self._wall

    def now(self) -> datetime:
        return naive_utc(self._wall)

    def advance(self, seconds: float) -> None:
        self._mono += seconds
        self._wall += seconds
