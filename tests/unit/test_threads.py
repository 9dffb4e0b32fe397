"""Thread names at the operating-system level, which per-thread CPU in /proc is grouped by."""

from __future__ import annotations

import sys
import threading
from pathlib import Path

import pytest

from collector.threads import current_os_name, name_os_thread, named_executor, os_thread_name

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux /proc")


def comm(native_id: int) -> str:
    return Path(f"/proc/self/task/{native_id}/comm").read_text().strip()


def in_thread(target, name: str = "sextant-probe-with-a-long-name") -> str:
    """The OS name `target` leaves its thread with (read while the thread still runs)."""
    seen: list[str] = []

    def run() -> None:
        target()
        seen.append(comm(threading.get_native_id()))

    thread = threading.Thread(target=run, name=name)
    thread.start()
    thread.join()
    return seen[0]


def test_a_thread_takes_its_python_name_cut_to_15_bytes() -> None:
    assert in_thread(name_os_thread) == "sextant-probe-w"


def test_a_name_held_for_a_block_passes_to_threads_started_in_it_and_is_then_restored() -> None:
    inherited: list[str] = []

    def start_a_thread() -> None:
        with os_thread_name("sextant-pool"):
            child = threading.Thread(target=lambda: inherited.append(current_os_name()))
            child.start()
            child.join()

    def held() -> None:
        name_os_thread("sextant-caller")
        start_a_thread()

    assert in_thread(held) == "sextant-caller"
    assert inherited == ["sextant-pool"]


def test_an_executor_names_its_threads() -> None:
    with named_executor("sextant-async", 1) as pool:
        assert pool.submit(current_os_name).result() == "sextant-async_0"
