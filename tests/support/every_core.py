"""A fuzzing function run in one process per core at once: run serially, the differential tests
would leave the other core idle."""

from __future__ import annotations

import os
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from typing import TypeVar

T = TypeVar("T")
B = TypeVar("B")


def on_every_core(share: Callable[[int, int, B], T], budget: B) -> list[T]:
    """`share(worker, workers, budget)` in each of one spawned process per core (none of the
    test process's state goes with it); their results in worker order. The budget is the
    share's to read: a deadline (`time.monotonic()`, the same clock in every process) or a
    count to split between the workers."""
    workers = len(os.sched_getaffinity(0))
    with ProcessPoolExecutor(workers, mp_context=get_context("spawn")) as pool:
        futures = [pool.submit(share, worker, workers, budget) for worker in range(workers)]
        return [future.result() for future in futures]
