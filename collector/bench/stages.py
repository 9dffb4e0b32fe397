"""CPU per pipeline stage of a running collector, from /proc, without touching its hot path.

A snapshot reads utime + stime of every thread of the collector process
(`/proc/<pid>/task/<tid>/stat`) and of its child processes (the worker pool); two snapshots
give the CPU each stage used in between. Threads are grouped into stages by their
operating-system name (`comm`, 15 bytes), which the collector sets for every thread it starts
(`collector.threads`); gRPC names its own. Linux only.
"""

from __future__ import annotations

import math
import os
import time
from dataclasses import dataclass, field
from pathlib import Path

PROC = Path("/proc")
TICKS_PER_SECOND = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
NAME_BYTES = 15

# The receiving process's threads by name prefix; its main thread (the event loop: gRPC's asyncio
# server, OTLP/HTTP, the admin server, inline decoding) is `receive` too.
PREFIXES = (
    ("sextant-decode", "decode"),
    ("sextant-writer", "write"),
    ("sextant-journal", "journal"),
    ("sextant-checkpoint", "checkpoint"),
    ("sextant-duckdb", "duckdb"),
    ("sextant-arrow", "arrow"),
    ("jemalloc_bg_thd", "arrow"),
    ("sextant-pool", "hand-over"),
    ("sextant-native", "native"),
    ("sextant-assembler", "assemble"),
    ("sextant-async", "admin"),
    ("sextant-metrics", "admin"),
    ("sextant-sessions", "sessions"),
    ("sextant-judge", "judges"),  # the judge stage and its calls (sextant-judge-calls)
    ("sextant-evaluations", "eval-events"),
    ("sextant-events-out", "eval-events"),
    ("sextant-drift", "drift"),
    ("sextant-decisions", "decisions"),
    ("sextant-rules", "tickers"),
    ("sextant-alerts", "tickers"),
    ("sextant-export", "tickers"),
    ("sextant-retention", "tickers"),
    ("sextant-gc", "gc"),
    ("sextant-embedded", "receive"),
    ("sextant-grpc", "receive"),
    ("sextant-http", "receive"),
    ("grpc", "receive"),
    ("event_engine", "receive"),
    ("lifeguard", "receive"),
    ("default-executo", "receive"),
    ("resolver-execut", "receive"),
)
# What each stage is, in the order of a report.
STAGES = {
    "receive": "event loop and listener threads: receive, answer, small requests decoded inline",
    "decode": "decoding threads (sextant-decode*)",
    "workers": "worker processes: decoding large requests, building and evaluating trajectories",
    "hand-over": "the process pool's threads: requests to the workers, answers back",
    "native": "the native assembly threads: rounds built and evaluated in the collector process",
    "journal": "the ingest journal: appends, fsyncs and acknowledgements",
    "write": "the group-commit writer: loads into DuckDB (with its commit hooks)",
    "checkpoint": "background checkpoints",
    "duckdb": "DuckDB's own threads: parallel scans, checkpoint work",
    "arrow": "Arrow's thread pool (the commit hook's group-by) and its allocator's thread",
    "assemble": "the assembler: queries; with assembler.native off, small rounds built in place",
    "admin": "asyncio worker threads and the scrape thread: admin API, /metrics",
    "sessions": "the session stage: runs grouped into sessions, session rules",
    "judges": "the judge stage and its calls to the judge model",
    "eval-events": "evaluation events: results received from and sent to OTLP",
    "drift": "drift rounds: window rules",
    "decisions": "the decision engine's rounds",
    "tickers": "rule reloads, alerts, export, retention",
    "gc": "Python's full garbage collections, once a minute (young ones count where they run)",
    "exited": "threads that ended during the window",
    "other": "threads nobody named (they carry the main thread's name), other processes",
}
WORKER_MARK = b"spawn_main"  # a multiprocessing spawn child: a worker of the pool


@dataclass(frozen=True)
class Snapshot:
    """CPU seconds so far, per thread of the collector process and per process."""

    at: float  # time.monotonic() when it was taken
    pid: int
    threads: dict[int, tuple[str, float]] = field(default_factory=dict)  # tid -> (comm, s)
    processes: dict[int, tuple[str, float]] = field(default_factory=dict)  # pid -> (stage, s)
    machine: tuple[float, float] = (0.0, 0.0)  # the whole machine's (busy, stolen) seconds


def stat_fields(path: Path) -> tuple[str, list[str]] | None:
    """(comm, the fields after it) of a /proc stat file; None once the task is gone."""
    try:
        text = path.read_text()
    except OSError:
        return None
    # comm is in parentheses and may itself hold spaces and parentheses.
    return text[text.index("(") + 1 : text.rindex(")")], text[text.rindex(")") + 2 :].split()


def cpu_seconds(fields: list[str]) -> float:
    """utime + stime (fields 14 and 15 of stat(5), counted from the one after comm as 3)."""
    return (int(fields[11]) + int(fields[12])) / TICKS_PER_SECOND


def process_seconds(pid: int) -> float:
    """CPU seconds of a process so far, its ended threads included; 0 once it is gone."""
    found = stat_fields(PROC / str(pid) / "stat")
    return cpu_seconds(found[1]) if found else 0.0


def machine_seconds() -> tuple[float, float]:
    """(busy, stolen) CPU seconds of the whole machine so far (/proc/stat): what else ran on
    the cores, and what a hypervisor took from them, tell how far a run's figures hold."""
    try:
        first = (PROC / "stat").read_text().split("\n", 1)[0].split()
    except OSError:
        return 0.0, 0.0
    # cpu user nice system idle iowait irq softirq steal ...
    user, nice, system, _idle, _iowait, irq, softirq, steal = (int(v) for v in first[1:9])
    busy = user + nice + system + irq + softirq
    return busy / TICKS_PER_SECOND, steal / TICKS_PER_SECOND


def children(pid: int) -> list[int]:
    """Child processes of every thread of `pid` (a pool started from a passing thread has
    that thread as its parent task)."""
    found: list[int] = []
    for task in (PROC / str(pid) / "task").glob("*"):
        try:
            found += [int(c) for c in (task / "children").read_text().split()]
        except OSError:
            continue
    return sorted(set(found))


def child_stage(pid: int) -> str:
    try:
        cmdline = (PROC / str(pid) / "cmdline").read_bytes()
    except OSError:
        return "other"
    return "workers" if WORKER_MARK in cmdline else "other"


def snapshot(pid: int) -> Snapshot:
    """Every thread of `pid`, then the process totals (which also hold ended threads)."""
    threads: dict[int, tuple[str, float]] = {}
    for task in (PROC / str(pid) / "task").glob("*"):
        found = stat_fields(task / "stat")
        if found is not None:
            threads[int(task.name)] = (found[0], cpu_seconds(found[1]))
    processes = {pid: ("server", process_seconds(pid))}
    for child in children(pid):
        processes[child] = (child_stage(child), process_seconds(child))
    return Snapshot(time.monotonic(), pid, threads, processes, machine_seconds())


def stage_of(tid: int, comm: str, pid: int) -> str:
    """The stage of a thread of the collector process, by its name."""
    if tid == pid:
        return "receive"
    for prefix, stage in PREFIXES:
        if comm.startswith(prefix[:NAME_BYTES]):
            return stage
    return "other"


def add(totals: dict[str, float], stage: str, seconds: float) -> None:
    totals[stage] = totals.get(stage, 0.0) + seconds


def stage_seconds(before: Snapshot, after: Snapshot) -> dict[str, float]:
    """CPU seconds per stage between two snapshots (threads and processes that started in
    between count from zero); every stage of STAGES is present."""
    totals = dict.fromkeys(STAGES, 0.0)
    live = 0.0
    for tid, (comm, seconds) in after.threads.items():
        used = seconds - before.threads.get(tid, (comm, 0.0))[1]
        live += used
        add(totals, stage_of(tid, comm, after.pid), used)
    for pid, (stage, seconds) in after.processes.items():
        used = seconds - before.processes.get(pid, (stage, 0.0))[1]
        if stage == "server":
            # The process total less its live threads: those that ended in the window.
            add(totals, "exited", max(0.0, used - live))
        else:
            add(totals, stage, used)
    return totals


@dataclass(frozen=True)
class StageRow:
    stage: str
    us_per_span: float  # CPU µs per stored span, over all the work those spans caused
    share: float  # percent of all the cores while the load ran
    load_us_per_span: float = math.nan  # CPU µs per stored span while the load ran


def stage_rows(
    spent: dict[str, float], during_load: dict[str, float], spans: int, load: float, cores: int
) -> list[StageRow]:
    """Per stage, `spent` (CPU s until the work the spans caused was done: assembly finishes
    after the load) as µs per span, and `during_load` as a share of `cores` over `load` s."""
    rows = []
    for stage, used in spent.items():
        per_span = used * 1e6 / spans if spans else 0.0
        loaded = during_load.get(stage, 0.0)
        share = 100.0 * loaded / (load * cores) if load > 0 and cores else 0.0
        during = loaded * 1e6 / spans if spans else 0.0
        rows.append(StageRow(stage, per_span, share, during))
    return rows


def machine_rows(
    before: Snapshot, after: Snapshot, ours: float, load: float, cores: int
) -> list[StageRow]:
    """The share of the cores that neither the collector nor the load generator (`ours`, CPU
    seconds) used while the load ran, and the share a hypervisor stole."""
    wall = max(load, 1e-9) * cores
    busy = after.machine[0] - before.machine[0]
    stolen = after.machine[1] - before.machine[1]
    return [
        StageRow("rest of machine", math.nan, 100.0 * max(0.0, busy - ours) / wall),
        StageRow("stolen", math.nan, 100.0 * stolen / wall),
    ]


def cores() -> int:
    """The cores this process (and the collector it starts) may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1
