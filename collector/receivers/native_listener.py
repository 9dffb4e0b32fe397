"""What the native listeners' receivers share (OTLP/gRPC in native_grpc.py, OTLP/HTTP in
native_http.py): the pipe that wakes the event loop when calls wait for it, starting each call
taken as a task, recording the guard calls the listener answered itself, and a shutdown that
lets calls in flight be answered."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from typing import Protocol

from collector.guard.service import Guard
from collector.lifecycle import remaining

log = logging.getLogger(__name__)


class Listening(Protocol):
    """The native server's side of a shutdown (collector/native/listener.rs)."""

    def stop(self) -> None: ...

    def stopped(self) -> bool: ...

    def close(self) -> None: ...


class NativeListener:
    """A receiver whose calls a native server takes and hands over; subclasses start the calls
    (`_start_calls`) and set `server` once started."""

    server: Listening | None = None
    guard: Guard | None
    port = 0
    _wake = -1  # the loop's end of the wake-up pipe
    _tasks: set[asyncio.Task[None]]  # calls being answered

    @staticmethod
    def pipe() -> tuple[int, int]:
        """A non-blocking pipe: the loop's end, and the server's (handed over to it)."""
        wake, woken = os.pipe()
        os.set_blocking(wake, False)
        os.set_blocking(woken, False)
        return wake, woken

    @staticmethod
    def close_pipe(wake: int) -> None:
        os.close(wake)

    def watch(self, wake: int) -> None:
        """Take the calls whenever the server wakes the loop through `wake`."""
        self._wake, self._tasks = wake, set()
        asyncio.get_running_loop().add_reader(wake, self._take)

    def started(self, task: asyncio.Task[None]) -> None:
        """Keep a call's task until it ends."""
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _start_calls(self, loop: asyncio.AbstractEventLoop) -> None:
        raise NotImplementedError

    def _take(self) -> None:
        """The calls that arrived since the loop last looked, each started as a task."""
        with contextlib.suppress(BlockingIOError):
            os.read(self._wake, 4096)
        self._start_calls(asyncio.get_running_loop())
        if self.guard is not None:
            try:
                self.guard.answered_by_listener()  # calls the listener answered: their steps
            except Exception:  # never let recording take the calls' hand-over down
                log.exception("recording the guard steps answered natively failed")

    async def shutdown(self, deadline: float) -> None:
        """Stop taking calls; calls in flight, also those handed over meanwhile, get until the
        deadline to be answered."""
        server = self.server
        if server is None:
            return
        server.stop()
        while not server.stopped() and remaining(deadline) > 0:
            await asyncio.sleep(0.02)
        if self.guard is not None:
            self.guard.answered_by_listener()  # the steps of the last calls answered natively
        self.server = None
        asyncio.get_running_loop().remove_reader(self._wake)
        os.close(self._wake)
        await asyncio.to_thread(server.close)
