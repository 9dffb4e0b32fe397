"""Transparent huge pages off for a benchmark's client, whose own stalls would count as the
collector's latency.

The native extension's allocator (mimalloc) asks the kernel for transparent huge pages on its
regions (`madvise(MADV_HUGEPAGE)`) and gives pages it no longer uses back after a short delay; the
next allocation there faults in a whole 2 MiB page, which the kernel zeroes first. In the guard
benchmark's client (a thousand calls a second on one thread) that was a 4 ms stall about every 256
ms, during which no call was sent or read: most of the p99 it reported (docs/performance.md).
`prctl(PR_SET_THP_DISABLE)` turns them off for the whole process, and for the processes it starts
afterwards: the collector's own setting is left to its operator. Linux only; elsewhere nothing is
done.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import sys

log = logging.getLogger(__name__)

PR_SET_THP_DISABLE = 41  # prctl(2)


def no_transparent_huge_pages() -> bool:
    """Turn transparent huge pages off for this process (before its threads allocate much);
    whether they were."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        if libc.prctl(PR_SET_THP_DISABLE, 1, 0, 0, 0) == 0:
            return True
    except (OSError, AttributeError):
        pass
    log.warning("could not turn transparent huge pages off; the client may stall for ms")
    return False
