"""glibc malloc settings for a long-running collector: large blocks are given back to the system.

glibc serves a block of at least `M_MMAP_THRESHOLD` (128 KiB) with its own mmap, unmapped when
freed. But by default the threshold moves: each time such a block is freed, it rises to that
block's size (up to 32 MiB). After the first few OTLP requests (a 512-span request is about
460 KB of bytes, then the decoded columns, the pickled rounds for the worker processes) every
request-sized block comes from the arenas instead, where blocks of different lifetimes sit
side by side: the freed space is kept by malloc and reused only for what fits. At 4,000 spans/s
that kept space grew from 49 to 173 MiB in the first 6 minutes and the RSS kept rising by about
30 MiB a minute, while the bytes in use hardly moved; with the threshold fixed, the kept space
stayed at about 30 MiB and the RSS was 100-260 MiB lower, growing more slowly but not yet flat
(docs/performance.md).

Setting the threshold explicitly turns the moving threshold off (mallopt(3)): large blocks are
mapped and unmapped as at the start, at the cost of a mmap/munmap and the page faults of fresh
pages per request. An operator's own `MALLOC_MMAP_THRESHOLD_` (glibc's environment variable)
is left alone. Other C libraries (musl) have no mallopt: nothing is changed there.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import os

log = logging.getLogger(__name__)

M_MMAP_THRESHOLD = -3  # mallopt(3)'s parameter numbers (malloc.h)
MMAP_THRESHOLD_BYTES = 128 * 1024  # glibc's own starting value, kept fixed
ENV_OVERRIDE = "MALLOC_MMAP_THRESHOLD_"


def fix_mmap_threshold(threshold: int = MMAP_THRESHOLD_BYTES) -> bool:
    """Fix glibc's mmap threshold at `threshold` bytes (called once at the start of a process,
    before its threads allocate much); whether it was set."""
    if ENV_OVERRIDE in os.environ:
        return False  # the operator chose: glibc read it at start
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False  # not glibc
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    if mallopt(M_MMAP_THRESHOLD, threshold) != 1:
        log.warning("could not set malloc's mmap threshold; memory may grow under load")
        return False
    return True
