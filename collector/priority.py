"""The native gRPC listener's threads ahead of the collector's others for the CPU.

A guard call over gRPC is answered in the listener's threads (collector/native/guard_listen.rs)
while an agent waits before its tool call; storage, assembly, evaluation and the event loop's
ingest work are asynchronous. On a machine whose cores they share, a listener thread that
becomes runnable waits behind them for a core: on the 2-core benchmark machine that wait, not
the judgement, was most of a guard call's p99. Raising the others' nice value (which any
process may do to its own threads) lets the listener's threads run first when they have work.
Threads started later inherit their creator's value, so the whole collector but the listener
keeps it. Linux only (per-thread nice values under /proc/self/task); elsewhere it does nothing.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

log = logging.getLogger(__name__)

TASKS = Path("/proc/self/task")
LISTENER = "sextant-grpc"  # the OS name of the gRPC listener's threads (collector/threads.py)


def behind_the_listener(nice: int) -> int:
    """Every thread of the process but the gRPC listener's runs `nice` steps lower than the
    listener's (never higher than it runs already); how many threads were changed."""
    if nice <= 0 or not TASKS.is_dir() or not hasattr(os, "setpriority"):
        return 0
    threads: dict[int, str] = {}
    for task in TASKS.iterdir():
        try:
            threads[int(task.name)] = (task / "comm").read_text().strip()
        except (OSError, ValueError):
            continue  # ended meanwhile
    listener = [tid for tid, name in threads.items() if name == LISTENER]
    if not listener:
        return 0
    try:
        target = os.getpriority(os.PRIO_PROCESS, listener[0]) + nice
    except OSError:
        return 0
    changed = 0
    for tid, name in threads.items():
        if name == LISTENER:
            continue
        try:
            if os.getpriority(os.PRIO_PROCESS, tid) < target:
                os.setpriority(os.PRIO_PROCESS, tid, min(target, 19))
                changed += 1
        except OSError:
            continue  # ended meanwhile, or not ours to change
    log.info("%d threads run %d nice steps behind the gRPC listener's", changed, nice)
    return changed
