"""The event loop where judge calls wait for their answers, in a thread of its own.

The judge stage's looks plan calls and hand them here without waiting for them: each call's
result is stored when its answer comes, so a slow judge delays only its own pack's results,
never another pack's nor the next look. Planning runs on this loop too (`run`), so budgets, the
cache and the calls in flight are only ever touched from this one thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

import aiohttp

from collector.lifecycle import remaining
from collector.threads import name_os_thread

T = TypeVar("T")


class CallLoop:
    """start → run / spawn from any thread → shutdown (cancels what waits; safe twice)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.loop: asyncio.AbstractEventLoop | None = None
        self.thread: threading.Thread | None = None
        self._session: aiohttp.ClientSession | None = None
        self._tasks: set[asyncio.Task[Any]] = set()

    def start(self) -> None:
        if self.loop is not None:
            return
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self._run, name=self.name, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        name_os_thread(self.name)
        assert self.loop is not None
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()

    @property
    def session(self) -> aiohttp.ClientSession:
        """The one HTTP session of the judges (on this loop; made on first use)."""
        if self._session is None:
            self._session = aiohttp.ClientSession()
        return self._session

    def run(self, work: Callable[[], T], timeout: float = 30.0) -> T:
        """`work()` on the loop's thread, its result handed back (it must not block)."""
        assert self.loop is not None, "CallLoop.run before start"

        async def call() -> T:
            return work()

        return asyncio.run_coroutine_threadsafe(call(), self.loop).result(timeout)

    def spawn(self, coroutine: Coroutine[Any, Any, Any]) -> None:
        """Run `coroutine` as a task (called on the loop's thread, e.g. from `run`'s work)."""
        assert self.loop is not None
        task = self.loop.create_task(coroutine)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def threads(self) -> list[threading.Thread]:
        return [self.thread] if self.thread is not None else []

    def shutdown(self, deadline: float) -> None:
        """Cancel the calls still waiting (their runs are looked at again after a restart)."""
        loop, self.loop = self.loop, None
        if loop is None:
            return
        with contextlib.suppress(Exception):
            asyncio.run_coroutine_threadsafe(self._cancel(), loop).result(remaining(deadline))
        loop.call_soon_threadsafe(loop.stop)
        if self.thread is not None:
            self.thread.join(remaining(deadline))
        if not loop.is_running():
            loop.close()

    async def _cancel(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        if self._session is not None:
            await self._session.close()
