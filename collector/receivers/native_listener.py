"""What the native listeners' receivers share (OTLP/gRPC in native_grpc.py, OTLP/HTTP in
native_http.py): the pipe that wakes the event loop when calls wait for it, starting each call
taken as a task, and a shutdown that lets calls in flight be answered (the guard records the
calls the listener answered itself on its own clock)."""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Callable
from typing import Protocol, TypeVar

from collector.errors import StartupError
from collector.guard.service import Guard
from collector.lifecycle import remaining
from collector.normalize.native import native


class Listening(Protocol):
    """A native server as its receiver starts and stops it (collector/native/listener.rs)."""

    port: int

    def answer_guard_calls(self, runs: native.GuardRuns) -> None: ...

    def stop(self) -> None: ...

    def stopped(self) -> bool: ...

    def close(self) -> None: ...


S = TypeVar("S", bound=Listening)


class NativeListener:
    """A receiver whose calls a native server takes and hands over; subclasses start their
    server through `listen` and each call taken (`_start_calls`)."""

    server: Listening | None = None
    guard: Guard | None
    port = 0
    _wake = -1  # the loop's end of the wake-up pipe
    _tasks: set[asyncio.Task[None]]  # calls being answered

    def listen(
        self, what: str, host_port: tuple[str, int], tokens: list[bytes], serve: Callable[[int], S]
    ) -> S:
        """The server `serve(wake_fd)` makes, listening on `host_port` for `what` and answering
        the guard's calls about kept runs (with the OTLP listener's `tokens`); the loop takes
        the calls whenever the server wakes it through the pipe whose write end it was given."""
        wake, woken = os.pipe()
        os.set_blocking(wake, False)
        os.set_blocking(woken, False)
        try:
            server = serve(woken)  # `woken` is the server's from here on, also when it fails
        except OSError as exc:
            os.close(wake)
            host, port = host_port
            raise StartupError(
                f"cannot listen on {host}:{port} for {what}: address in use or not available"
                f" ({exc})"
            ) from exc
        self.server, self.port = server, server.port
        runs = None if self.guard is None else self.guard.listener(tokens)
        if runs is not None:
            server.answer_guard_calls(runs)
        self._wake, self._tasks = wake, set()
        asyncio.get_running_loop().add_reader(wake, self._take)
        return server

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
