"""A background thread that runs one function every interval until it is stopped."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from collector.lifecycle import remaining

log = logging.getLogger(__name__)


class Ticker:
    """start → tick every `interval` seconds → shutdown (safe twice). A tick that raises is
    logged and the next one runs: a background stage must outlive its errors."""

    def __init__(
        self, name: str, interval: float | Callable[[], float], tick: Callable[[], object]
    ) -> None:
        """`interval` may be a function, asked before each wait (e.g. the time to a deadline)."""
        self.name = name
        self.interval = interval
        self.tick = tick
        self.stopping = threading.Event()
        self.thread: threading.Thread | None = None

    def start(self) -> None:
        self.thread = threading.Thread(target=self._run, name=self.name, daemon=True)
        self.thread.start()

    def shutdown(self, deadline: float) -> None:
        self.stopping.set()
        if self.thread is not None:
            self.thread.join(remaining(deadline))

    def threads(self) -> list[threading.Thread]:
        return [self.thread] if self.thread is not None else []

    def _run(self) -> None:
        while not self.stopping.wait(self.interval() if callable(self.interval) else self.interval):
            try:
                self.tick()
            except Exception:
                log.exception("%s: tick failed", self.name)


class TickingStage:
    """The lifecycle of a stage whose one thread is its ticker (checkpoints, export, retention):
    start ticking, stop before the deadline, own that thread."""

    ticker: Ticker

    def start(self) -> None:
        self.ticker.start()

    def shutdown(self, deadline: float) -> None:
        self.ticker.shutdown(deadline)

    def threads(self) -> list[threading.Thread]:
        return self.ticker.threads()
