"""A fuzzing function run in one process per core at once: the differential tests have the
seconds CI gives them, and run serially they would leave the other core idle."""

from __future__ import annotations

import os
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from typing import TypeVar

T = TypeVar("T")


def on_every_core(share: Callable[[int, int, float], T], deadline: float) -> list[T]:
    """`share(worker, workers, deadline)` in each of one spawned process per core (none of the
    test process's state goes with it; `deadline` is `time.monotonic()`, the same clock in
    every process); their results in worker order."""
    workers = len(os.sched_getaffinity(0))
    with ProcessPoolExecutor(workers, mp_context=get_context("spawn")) as pool:
        futures = [pool.submit(share, worker, workers, deadline) for worker in range(workers)]
        return [future.result() for future in futures]
