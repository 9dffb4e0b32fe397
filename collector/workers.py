"""The pool of worker processes that run the GIL-bound work: decoding requests, building
trajectories. Callers get the same answers inline when the pool has no workers."""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import multiprocessing
import os
import signal
import threading
import time
from collections.abc import Callable
from concurrent.futures.process import BrokenProcessPool
from typing import Any, TypeVar

from collector.errors import TransientError
from collector.malloc import fix_mmap_threshold
from collector.memprofile import start_from_environment
from collector.threads import name_os_thread, os_thread_name

log = logging.getLogger(__name__)
R = TypeVar("R")
# How often a worker checks that the process that started it is still there.
PARENT_CHECK_SECONDS = 0.2


def watch_parent(parent: int) -> None:
    """The initializer of every worker: exit once `parent` is gone, so that a main process
    killed outright (SIGKILL, OOM killer) leaves no orphans behind.

    A thread polling the parent's pid, not prctl(PR_SET_PDEATHSIG): the kernel sends that signal
    when the *thread* that started the worker ends, and pools are started from passing threads.
    """

    def watch() -> None:
        name_os_thread()
        while os.getppid() == parent:
            time.sleep(PARENT_CHECK_SECONDS)
        # No cleanup, as if the parent's end had taken the worker with it: what it was doing
        # was for the parent alone.
        os.kill(os.getpid(), signal.SIGKILL)

    threading.Thread(target=watch, name="sextant-parent-watch", daemon=True).start()
    fix_mmap_threshold()  # as in the main process (collector/malloc.py)
    start_from_environment(f".worker-{os.getpid()}")  # only when diagnosing memory


def warm_up() -> int:
    """Run once per worker at start so the first real task does not pay for imports; returns
    the worker's process id."""
    import collector.assembler.work
    import collector.evaluation.round
    import collector.normalize.wire  # noqa: F401

    return os.getpid()


class WorkerPool:
    """A process pool that replaces itself when a worker dies, failing only the tasks in flight.

    Spawned, not forked: forking a process that runs gRPC threads is unsafe.
    """

    def __init__(self, workers: int) -> None:
        self.workers = workers
        self._pool: concurrent.futures.ProcessPoolExecutor | None = None
        self._pids: list[int] = []
        self._lock = threading.Lock()

    def start(self) -> None:
        if self.workers:
            self._pool = self._new_pool()

    def _new_pool(self) -> concurrent.futures.ProcessPoolExecutor:
        # Every worker is started at once (the pool starts them all on the first submits), so
        # the warm-up answers name every worker process. The pool's threads, which pickle the
        # tasks to the workers and read their answers, start on the first submit and take the
        # name `sextant-pool` from this thread.
        pool = concurrent.futures.ProcessPoolExecutor(
            self.workers,
            mp_context=multiprocessing.get_context("spawn"),
            initializer=watch_parent,
            initargs=(os.getpid(),),
        )
        with os_thread_name("sextant-pool"):
            warmed = [pool.submit(warm_up) for _ in range(self.workers)]
        self._pids = sorted({future.result() for future in warmed})
        return pool

    def shutdown(self, deadline: float) -> None:
        """Stop the workers; work in flight finishes (its callers wait for it anyway)."""
        with self._lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)

    def threads(self) -> list[threading.Thread]:
        return []  # processes, not threads: they hold no DuckDB connection

    def pids(self) -> list[int]:
        return list(self._pids) if self._pool is not None else []

    def run(self, fn: Callable[..., R], *args: Any) -> R:
        """Run `fn(*args)` in a worker (blocking the calling thread), or inline without workers."""
        pool = self._pool
        if pool is None:
            return fn(*args)
        try:
            return pool.submit(fn, *args).result()
        except BrokenProcessPool as exc:
            self._replace(pool)
            raise TransientError("a worker process failed; retry") from exc

    async def run_async(self, fn: Callable[..., R], *args: Any) -> R:
        pool = self._pool
        if pool is None:
            return fn(*args)
        try:
            return await asyncio.wrap_future(pool.submit(fn, *args))
        except BrokenProcessPool as exc:
            await asyncio.to_thread(self._replace, pool)
            raise TransientError("a worker process failed; retry the request") from exc

    def _replace(self, broken: concurrent.futures.ProcessPoolExecutor) -> None:
        with self._lock:
            if self._pool is not broken:
                return  # another caller already replaced it
            log.error("a worker process died; starting a new pool")
            broken.shutdown(wait=False, cancel_futures=True)
            self._pool = self._new_pool()
