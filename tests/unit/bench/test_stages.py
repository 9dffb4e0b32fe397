"""CPU per stage from /proc: threads grouped by name, and the arithmetic of the report."""

from __future__ import annotations

import os
import sys
import threading
import time
from pathlib import Path

import pytest

from collector.bench.memory import rss_kib, slope_per_minute
from collector.bench.stages import (
    TICKS_PER_SECOND,
    Snapshot,
    cpu_seconds,
    snapshot,
    stage_of,
    stage_rows,
    stage_seconds,
    stat_fields,
)
from collector.threads import name_os_thread

linux = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux /proc")


@pytest.mark.parametrize(
    ("comm", "stage"),
    [
        ("sextant-writer", "write"),
        ("sextant-checkpo", "checkpoint"),  # sextant-checkpoint, cut to 15 bytes
        ("sextant-assembl", "assemble"),
        ("sextant-decode_3", "decode"),
        ("sextant-pool", "hand-over"),
        ("sextant-native_1", "native"),
        ("sextant-duckdb", "duckdb"),
        ("sextant-arrow", "arrow"),
        ("sextant-async_0", "admin"),
        ("sextant-decisio", "decisions"),  # sextant-decisions
        ("sextant-drift", "drift"),
        ("sextant-session", "sessions"),  # sextant-sessions
        ("sextant-judge", "judges"),
        ("sextant-judge-c", "judges"),  # sextant-judge-calls
        ("sextant-evaluat", "eval-events"),  # sextant-evaluations
        ("sextant-events-", "eval-events"),  # sextant-events-out
        ("sextant-metrics", "admin"),
        ("sextant-rules", "tickers"),
        ("sextant-alerts-o", "tickers"),
        ("sextant-grpc", "receive"),
        ("event_engine", "receive"),
        ("grpc_global_tim", "receive"),
        ("python", "other"),  # nobody named it: it carries the main thread's name
    ],
)
def test_threads_are_grouped_by_name(comm: str, stage: str) -> None:
    assert stage_of(1001, comm, 1000) == stage


def test_a_stat_line_is_read_past_a_name_with_spaces_and_parentheses(tmp_path: Path) -> None:
    # stat(5): pid (comm) state ppid ... utime (14th) stime (15th) ...; comm is free text
    stat = tmp_path / "stat"
    after_comm = ["S", "1", *["0"] * 9, str(3 * TICKS_PER_SECOND), str(TICKS_PER_SECOND), "0"]
    stat.write_text(f"4242 (a) b (c d) {' '.join(after_comm)}\n")
    found = stat_fields(stat)
    assert found is not None
    comm, fields = found
    assert comm == "a) b (c d"
    assert cpu_seconds(fields) == pytest.approx(4.0)  # utime 3 s + stime 1 s
    assert stat_fields(tmp_path / "gone") is None  # the thread ended


def test_the_main_thread_receives() -> None:
    assert stage_of(1000, "python", 1000) == "receive"


def test_ended_threads_and_new_processes_are_counted() -> None:
    before = Snapshot(
        0.0,
        10,
        {10: ("python", 1.0), 11: ("sextant-writer", 2.0)},
        {
            10: ("server", 5.0),
            20: ("workers", 3.0),
        },
    )
    # thread 11 ended; thread 12 and worker 21 are new
    after = Snapshot(
        1.0,
        10,
        {10: ("python", 1.5), 12: ("sextant-assembl", 0.25)},
        {
            10: ("server", 6.0),
            20: ("workers", 3.5),
            21: ("workers", 0.5),
        },
    )
    spent = stage_seconds(before, after)
    assert spent["receive"] == pytest.approx(0.5)
    assert spent["assemble"] == pytest.approx(0.25)
    assert spent["exited"] == pytest.approx(0.25)  # 1.0 for the process less 0.75 live
    assert spent["workers"] == pytest.approx(1.0)
    assert spent["write"] == 0.0


def test_cpu_per_span_and_share_of_the_cores() -> None:
    (row,) = stage_rows({"write": 0.5}, {"write": 0.4}, spans=10_000, load=1.0, cores=2)
    assert row.us_per_span == pytest.approx(50.0)  # 0.5 s over 10,000 spans
    assert row.share == pytest.approx(20.0)  # 0.4 s of 2 cores for 1 s
    assert row.load_us_per_span == pytest.approx(40.0)  # 0.4 s of it while the load ran


@linux
def test_a_thread_burning_cpu_is_attributed_to_its_stage() -> None:
    named, go, burnt, done = (threading.Event() for _ in range(4))

    def burn() -> None:
        name_os_thread()
        named.set()
        go.wait()
        start = time.thread_time()
        while time.thread_time() - start < 0.2:
            pass
        burnt.set()
        done.wait()  # alive until the second snapshot

    thread = threading.Thread(target=burn, name="sextant-writer", daemon=True)
    thread.start()
    named.wait(5)
    before = snapshot(os.getpid())
    go.set()
    burnt.wait(5)
    after = snapshot(os.getpid())
    done.set()
    thread.join()
    spent = stage_seconds(before, after)
    assert spent["write"] == pytest.approx(0.2, abs=0.03)  # clock ticks: 10 ms
    # The burn is the writer's, not an ended thread's: what "exited" holds here is tick
    # rounding and the threads earlier tests left behind, ending in the window.
    assert spent["exited"] < 0.1


def test_the_rss_slope_is_per_minute() -> None:
    assert slope_per_minute([(t, 100.0 + t / 2) for t in range(10)]) == pytest.approx(30.0)
    assert slope_per_minute([(0.0, 5.0)]) == 0.0


@linux
def test_rss_is_read() -> None:
    assert rss_kib(os.getpid()) > 1024
