"""Where a process's memory goes, for finding what grows under sustained load.

Off unless `SEXTANT_MEMORY_PROFILE` names a file: then, every `SEXTANT_MEMORY_PROFILE_SECONDS`
(60), a report is appended to that file: the process's RSS; the Python heap as tracemalloc
traces it, with the source lines whose allocations grew the most since the first report; what
Arrow's memory pool holds; glibc malloc's bytes in use and free but kept (mallinfo2); and the
accounts other parts add (DuckDB's `duckdb_memory()`). An RSS that grows while all of these stay
flat points at an allocator keeping freed memory (collector/malloc.py), not at a leak.

Tracing costs CPU and memory (a record per traced block; on the loaded 2-core machine it cut the
throughput by more than half), so it is a diagnosis tool, not something to leave on in
production; `SEXTANT_MEMORY_PROFILE_FRAMES=0` keeps the cheap accounts without tracing. Each
worker process reports to a file of its own (the name with `.worker-<pid>` added).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import threading
import time
import tracemalloc
from collections.abc import Callable
from functools import cache
from pathlib import Path

import pyarrow as pa

PROFILE_ENV = "SEXTANT_MEMORY_PROFILE"
EVERY_ENV = "SEXTANT_MEMORY_PROFILE_SECONDS"
FRAMES_ENV = "SEXTANT_MEMORY_PROFILE_FRAMES"
# 4 frames: enough to see whose call allocated, cheap enough to run under load; 0: no tracing
FRAMES = 4
TOP = 25
SMALLEST = 64 * 1024  # growth below this is not worth a line
# Other parts' own accounts (DuckDB's), each a line of the report; added by whoever owns them.
SOURCES: list[Callable[[], str]] = []
_started = False


def enabled() -> bool:
    return _started


def add_source(source: Callable[[], str]) -> None:
    """A line for every report (while profiling): `source` returns it, or raises."""
    if enabled():
        SOURCES.append(source)


def start_from_environment(suffix: str = "") -> threading.Thread | None:
    """Start tracing and reporting when the environment asks for it; the reporting thread.
    A worker process reports to the file named with `suffix` added (its own)."""
    global _started
    path = os.environ.get(PROFILE_ENV)
    if not path or _started:
        return None
    _started = True
    path += suffix
    every = float(os.environ.get(EVERY_ENV, "60"))
    frames = int(os.environ.get(FRAMES_ENV, str(FRAMES)))
    if frames:
        tracemalloc.start(frames)
    thread = threading.Thread(
        target=_report_forever, args=(Path(path), every), name="sextant-memprofile", daemon=True
    )
    thread.start()
    return thread


class MallInfo2(ctypes.Structure):
    """glibc's `struct mallinfo2` (glibc 2.33 and later)."""

    _fields_ = [
        (name, ctypes.c_size_t)
        for name in (
            "arena",  # bytes of the arenas' heaps (not mmapped chunks)
            "ordblks",
            "smblks",
            "hblks",
            "hblkhd",  # bytes in mmapped chunks
            "usmblks",
            "fsmblks",
            "uordblks",  # bytes in use
            "fordblks",  # bytes free, kept by malloc
            "keepcost",
        )
    ]


@cache
def _mallinfo2() -> Callable[[], MallInfo2]:
    mallinfo2 = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").mallinfo2
    mallinfo2.restype = MallInfo2
    return mallinfo2


def glibc_malloc() -> str:
    """What glibc's malloc holds (every arena): in use and free but kept."""
    info = _mallinfo2()()
    return (
        f"glibc malloc: in use {info.uordblks / 2**20:.0f} MiB, free but kept"
        f" {info.fordblks / 2**20:.0f} MiB, mmapped {info.hblkhd / 2**20:.0f} MiB"
    )


def rss_mib() -> float:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def report(
    first: tracemalloc.Snapshot | None, started: float
) -> tuple[str, tracemalloc.Snapshot | None]:
    """One report's text and the snapshot it was taken from."""
    tracing = tracemalloc.is_tracing()
    snapshot = (
        tracemalloc.take_snapshot().filter_traces(
            (tracemalloc.Filter(False, tracemalloc.__file__),)
        )
        if tracing
        else None
    )
    traced, peak = tracemalloc.get_traced_memory()
    pool = pa.default_memory_pool()
    lines = [
        f"== {time.monotonic() - started:.0f} s: RSS {rss_mib():.0f} MiB, Python traced"
        f" {traced / 2**20:.0f} MiB (peak {peak / 2**20:.0f}), Arrow {pool.backend_name}"
        f" {pa.total_allocated_bytes() / 2**20:.0f} MiB (pool max {pool.max_memory() / 2**20:.0f})"
    ]
    for source in [glibc_malloc, *SOURCES]:
        try:
            lines.append("  " + source())
        except Exception as exc:  # a diagnosis must not stop for one part's failure
            lines.append(f"  {source.__name__} failed: {exc}")
    if first is not None and snapshot is not None:
        for stat in snapshot.compare_to(first, "traceback")[:TOP]:
            if stat.size_diff < SMALLEST:
                break
            lines.append(
                f"  {stat.size_diff / 2**20:+8.1f} MiB {stat.count_diff:+9d} blocks"
                f" (now {stat.size / 2**20:.1f} MiB)"
            )
            lines += [f"      {frame}" for frame in stat.traceback.format()[-2 * FRAMES :]]
    return "\n".join(lines) + "\n", snapshot


def _report_forever(path: Path, every: float) -> None:
    started = time.monotonic()
    first: tracemalloc.Snapshot | None = None
    never = threading.Event()  # the thread ends with the process
    while not never.wait(every):
        text, snapshot = report(first, started)
        first = first or snapshot
        with path.open("a") as out:
            out.write(text)
