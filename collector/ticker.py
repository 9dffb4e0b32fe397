"""A background thread that runs one function every interval until it is stopped."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from collector.lifecycle import remaining
from collector.threads import name_os_thread

log = logging.getLogger(__name__)


class Ticker:
    """start → tick every `interval` seconds → shutdown (safe twice). A tick that raises is
    logged and the next one runs: a background stage must outlive its errors.

    `wake()` runs the next tick now instead of at the end of the wait, still in the one ticker
    thread, so ticks never overlap. Wake-ups coalesce: a burst of them costs at most one extra
    tick per `min_gap` seconds, and one that comes during a tick runs one more after it (that
    tick may have read what it was woken for too late)."""

    def __init__(
        self,
        name: str,
        interval: float | Callable[[], float],
        tick: Callable[[], object],
        min_gap: float = 0.05,
    ) -> None:
        """`interval` may be a function, asked before each wait (e.g. the time to a deadline)."""
        self.name = name
        self.interval = interval
        self.tick = tick
        self.min_gap = min_gap
        self.stopping = threading.Event()
        self.thread: threading.Thread | None = None
        self._woken = threading.Event()  # set by wake() and by shutdown(): ends the wait
        self._last_tick = float("-inf")

    def start(self) -> None:
        self.thread = threading.Thread(target=self._run, name=self.name, daemon=True)
        self.thread.start()

    def wake(self) -> None:
        """Tick as soon as `min_gap` since the last tick allows; cheap, callable from any thread."""
        self._woken.set()

    def shutdown(self, deadline: float) -> None:
        self.stopping.set()
        self._woken.set()
        if self.thread is not None:
            self.thread.join(remaining(deadline))

    def threads(self) -> list[threading.Thread]:
        return [self.thread] if self.thread is not None else []

    def _run(self) -> None:
        name_os_thread(self.name)
        while not self.stopping.is_set():
            woken = self._woken.wait(self.interval() if callable(self.interval) else self.interval)
            if woken:
                gap = self._last_tick + self.min_gap - time.monotonic()
                if (gap > 0 and self.stopping.wait(gap)) or self.stopping.is_set():
                    return
                self._woken.clear()  # wake-ups from here on ask for one more tick after this
            self._last_tick = time.monotonic()
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
