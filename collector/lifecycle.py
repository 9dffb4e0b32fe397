"""The one lifecycle every stage follows: `start()`, `shutdown(deadline)` (safe twice; flushes
what it holds) and `threads()`, the threads it owns, so the pipeline can wire and stop stages
without reaching into them. A deadline is a `time.monotonic()` instant shared by a whole
shutdown sequence, so a slow stage leaves less time to the next instead of adding to it."""

from __future__ import annotations

import threading
import time
from typing import Protocol


def deadline_in(seconds: float) -> float:
    return time.monotonic() + seconds


def remaining(deadline: float) -> float:
    """Seconds left before `deadline` (never negative)."""
    return max(0.0, deadline - time.monotonic())


class Stage(Protocol):
    """A stage with threads of its own (writer, assembler, tickers...)."""

    def start(self) -> None: ...

    def shutdown(self, deadline: float) -> None: ...

    def threads(self) -> list[threading.Thread]: ...


class Edge(Protocol):
    """A network server on the event loop (the receivers, the admin API)."""

    async def start(self) -> None: ...

    async def shutdown(self, deadline: float) -> None: ...
