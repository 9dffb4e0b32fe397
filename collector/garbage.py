"""Python's full garbage collections on a clock of their own, not on allocation counts.

A full collection walks every object the collector still holds (kept guard runs, held batches,
caches: 150,000 or more under load) with the GIL held, 50-150 ms on these cores. CPython starts
one whenever a quarter as many objects as survived the last one have been promoted since: with
the runtime guard asked 1,000 times a second, every few seconds, and every call in flight waits
it out (a guard's p99 of 48-65 ms was these pauses; docs/performance.md). Young collections,
which find nearly all of the collector's cycles (an exception's traceback and frames), keep
CPython's cadence; full collections are left to a thread that runs one every
`FULL_COLLECTION_SECONDS`, so a pause comes once a minute instead of every few seconds and
cyclic garbage that reached the oldest generation lives at most that long.
"""

from __future__ import annotations

import gc
import logging
import threading
import time

from prometheus_client import CollectorRegistry, Histogram

from collector.threads import name_os_thread

log = logging.getLogger(__name__)

FULL_COLLECTION_SECONDS = 60.0
# gen2's count of young collections: never reached, so CPython starts no full collection itself
NEVER = 2**31 - 1


def collect_on_a_clock(
    registry: CollectorRegistry, period: float = FULL_COLLECTION_SECONDS
) -> threading.Event:
    """Stop CPython's own full collections and run one every `period` seconds on a daemon
    thread, each timed in `sextant_gc_full_collection_seconds`; set the returned event to stop
    the thread (the thresholds stay as set)."""
    took = Histogram(
        "sextant_gc_full_collection_seconds",
        "How long each full garbage collection (one a minute) held the process's GIL.",
        buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5),
        registry=registry,
    )
    young, middle, _ = gc.get_threshold()
    gc.set_threshold(young, middle, NEVER)
    stop = threading.Event()
    thread = threading.Thread(
        target=_collect, args=(period, stop, took), name="sextant-gc", daemon=True
    )
    thread.start()
    return stop


def _collect(period: float, stop: threading.Event, took: Histogram) -> None:
    name_os_thread()
    while not stop.wait(period):
        began = time.perf_counter()
        found = gc.collect()
        seconds = time.perf_counter() - began
        took.observe(seconds)
        log.debug("full garbage collection: %d objects freed in %.1f ms", found, seconds * 1000)
