"""The threads a caller waits on ahead of the collector's others for the CPU.

A guard call is answered in the native listeners' threads (collector/native/guard_listen.rs, over
gRPC and over HTTP) while an agent waits before its tool call; storage, assembly and evaluation are
asynchronous. On a machine whose cores they share, a listener thread that becomes runnable waits
behind them for a core: on the 2-core benchmark machine that wait, not the judgement, was most of a
guard call's p99. Raising the others' nice value (which any process may do to its own threads) lets
the listener's threads run first when they have work. The event loop stays with them: a guard call
the listener cannot answer itself and every export's acknowledgement wait on it (behind the others
it let `POST /v1/guard`, then answered on the loop, swing from 23 to 342 ms at p99 between runs).
Threads started later inherit their creator's value, so the whole collector but those threads keeps
it. Linux only (per-thread nice values under /proc/self/task); elsewhere it does nothing.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

log = logging.getLogger(__name__)

TASKS = Path("/proc/self/task")
# the OS names of the native listeners' threads (collector/threads.py)
LISTENERS = ("sextant-grpc", "sextant-http")


def behind_the_listener(nice: int, keep: int | None = None) -> int:
    """Every thread of the process but the native listeners' and the one whose id is `keep` (the
    event loop's) runs `nice` steps lower than the listeners' (never higher than it runs
    already); how many threads were changed."""
    if nice <= 0 or not TASKS.is_dir() or not hasattr(os, "setpriority"):
        return 0
    threads: dict[int, str] = {}
    for task in TASKS.iterdir():
        try:
            threads[int(task.name)] = (task / "comm").read_text().strip()
        except (OSError, ValueError):
            continue  # ended meanwhile
    listener = [tid for tid, name in threads.items() if name in LISTENERS]
    if not listener:
        return 0
    try:
        target = os.getpriority(os.PRIO_PROCESS, listener[0]) + nice
    except OSError:
        return 0
    changed = 0
    for tid, name in threads.items():
        if name in LISTENERS or tid == keep:
            continue
        try:
            if os.getpriority(os.PRIO_PROCESS, tid) < target:
                os.setpriority(os.PRIO_PROCESS, tid, min(target, 19))
                changed += 1
        except OSError:
            continue  # ended meanwhile, or not ours to change
    log.info("%d threads run %d nice steps behind the native listeners'", changed, nice)
    return changed
