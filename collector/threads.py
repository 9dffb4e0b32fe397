"""Operating-system names for the collector's threads, so per-thread CPU tells the stages apart.

Linux keeps a 15-byte name per thread (`/proc/<pid>/task/<tid>/comm`), which `top -H`, py-spy
and `scripts/benchmark` show; Python sets it from `threading.Thread.name` only from 3.14 on.
Every thread of the collector names itself when it starts (`name_os_thread`). Threads that a
library starts (DuckDB's, a process pool's) inherit the name of the thread that starts them, so
the code that starts them holds a name for that moment (`os_thread_name`).

The names group into stages (`collector.bench.stages`): `sextant-writer`, `sextant-checkpoint`,
`sextant-assembler`, `sextant-native` (rounds built and evaluated natively), `sextant-pool` (the
hand-over to the worker processes), `sextant-duckdb`, `sextant-grpc` (the gRPC listener's threads,
and grpcio's that it does not name itself), `sextant-http` (the HTTP listener's), `sextant-arrow`
(Arrow's thread pool), `sextant-async_N` (asyncio's worker threads: admin requests), the tickers,
and `sextant-decode*` for threads that decode requests. Elsewhere than on Linux these calls do
nothing.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import sys
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from functools import cache

NAME_BYTES = 15  # TASK_COMM_LEN less its terminating NUL
PR_SET_NAME = 15
PR_GET_NAME = 16


@cache
def _prctl() -> Callable[..., int] | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
    except OSError:
        return None
    prctl: Callable[..., int] = libc.prctl
    return prctl


def current_os_name() -> str:
    """The calling thread's name as the operating system has it ('' where unknown)."""
    prctl = _prctl()
    if prctl is None:
        return ""
    buffer = ctypes.create_string_buffer(NAME_BYTES + 1)
    prctl(PR_GET_NAME, buffer, 0, 0, 0)
    return buffer.value.decode(errors="replace")


def name_os_thread(name: str | None = None) -> None:
    """Give the calling thread `name` (default: its Python name), cut to 15 bytes, at the
    operating-system level. Cheap; call it once, first thing in a thread's target."""
    prctl = _prctl()
    if prctl is None:
        return
    text = name if name is not None else threading.current_thread().name
    prctl(PR_SET_NAME, text.encode()[:NAME_BYTES], 0, 0, 0)


@contextlib.contextmanager
def os_thread_name(name: str) -> Iterator[None]:
    """The calling thread carries `name` for the block, then its own name again: threads that
    a library starts inside the block are named after the work they do, not after the caller."""
    before = current_os_name()
    name_os_thread(name)
    try:
        yield
    finally:
        if before:
            name_os_thread(before)


def start_arrow_threads() -> None:
    """Start Arrow's CPU thread pool now, as `sextant-arrow`. It would start on the first
    compute call that needs it (the commit hook's group-by, in the writer's thread) and take
    that thread's name; a pool of more than a few threads may start the rest later."""
    import pyarrow as pa

    with os_thread_name("sextant-arrow"):
        chunked = pa.concat_tables([pa.table({"k": [i]}) for i in range(4 * pa.cpu_count())])
        chunked.group_by("k").aggregate([("k", "count")])


def named_executor(prefix: str, max_workers: int | None = None) -> ThreadPoolExecutor:
    """A thread pool whose threads carry their names (`prefix_0`, `prefix_1`...) at the
    operating-system level too."""
    return ThreadPoolExecutor(max_workers, thread_name_prefix=prefix, initializer=name_os_thread)
