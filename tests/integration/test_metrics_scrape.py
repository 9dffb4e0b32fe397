"""A Prometheus scrape never waits behind a round: not behind a decision round held in the
middle of its transitions, not behind store reads that fill the API's thread pool."""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests

from collector.decisions.state import DecisionState, Event
from tests.support.admin import firing, trajectory
from tests.support.agents import support_run
from tests.support.server import RunningServer, serve_deciding
from tests.support.wait import wait_for

# Well under Prometheus' default scrape timeout (10 s).
SCRAPE_SECONDS = 3.0
FIRING = (
    'sextant_decision_state{agent="support-agent",decision="QUARANTINE",'
    'service="support-desk",version="2.3.1"} 1.0'
)
HELD_SECONDS = 30.0  # a safety net: every test releases what it holds long before


@pytest.fixture
def server(tmp_path: Path) -> Iterator[RunningServer]:
    running = serve_deciding(tmp_path)
    yield running
    running.stop()


def scrape(server: RunningServer) -> str:
    reply = requests.get(f"{server.admin_url}/metrics", timeout=SCRAPE_SECONDS)
    reply.raise_for_status()
    return reply.text


def test_a_scrape_answers_while_a_decision_round_is_held_mid_round(server: RunningServer) -> None:
    """The round that fires the QUARANTINE stops inside its transitions (the decisions are
    being changed); scrapes answer meanwhile with the state before it, then show it fire."""
    engine = server.pipeline.decisions
    notifier = engine.notifier
    assert notifier is not None
    notify = notifier.notify
    inside, release = threading.Event(), threading.Event()

    def held(state: DecisionState, event: Event) -> None:
        inside.set()
        release.wait(HELD_SECONDS)
        notify(state, event)

    notifier.notify = held  # type: ignore[method-assign]
    try:
        trajectory(server, support_run(server, approve=False))
        assert inside.wait(HELD_SECONDS), "the decision round never reached its transitions"
        for _ in range(3):  # the state before the round
            assert FIRING not in scrape(server)
    finally:
        release.set()
    firing(server, "QUARANTINE")
    wait_for(lambda: FIRING in scrape(server))


def test_a_scrape_answers_while_store_reads_fill_the_thread_pool(server: RunningServer) -> None:
    """The API's and the console's reads run in the event loop's thread pool; reads waiting on
    a busy store fill it. A scrape does not queue behind them."""
    workers = min(32, (os.cpu_count() or 1) + 4)  # the pool's size (ThreadPoolExecutor default)
    started = threading.Semaphore(0)
    release = threading.Event()

    def read_waiting_on_the_store() -> None:
        started.release()
        release.wait(HELD_SECONDS)

    def fill() -> None:
        for _ in range(workers + 4):
            server.loop.run_in_executor(None, read_waiting_on_the_store)

    server.loop.call_soon_threadsafe(fill)
    try:
        for _ in range(workers):  # every thread of the pool is taken
            assert started.acquire(timeout=HELD_SECONDS)
        assert not started.acquire(blocking=False)  # and more reads are queued
        assert "sextant_build_info" in scrape(server)
    finally:
        release.set()
