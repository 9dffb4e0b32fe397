"""A receiver that trickles its reply cannot hold alert delivery, nor the admin API, past the
total deadline (`alerts.timeout_seconds`)."""

from __future__ import annotations

import os
import threading
import time

import pytest
import requests

from tests.support.admin import firing, trajectory
from tests.support.agents import support_run
from tests.support.server import serve_deciding
from tests.support.trickle import Trickler
from tests.support.wait import wait_for

DEADLINE = 3.0
# asyncio's default pool (the admin API's worker threads): more tests than it has threads.
POOL = min(32, (os.cpu_count() or 1) + 4)


@pytest.fixture
def trickler():
    t = Trickler(every=2.0)
    yield t
    t.close()


def post_alert_tests(
    url: str, count: int
) -> tuple[list[tuple[int, float, dict]], list[threading.Thread]]:
    """`count` concurrent POST /api/v1/alerts/test: the list each one's status, seconds and body
    is appended to, and the threads to join."""
    answers: list[tuple[int, float, dict]] = []

    def one() -> None:
        started = time.monotonic()
        reply = requests.post(f"{url}/api/v1/alerts/test", json={}, timeout=120)
        answers.append((reply.status_code, time.monotonic() - started, reply.json()))

    threads = [threading.Thread(target=one) for _ in range(count)]
    for t in threads:
        t.start()
    return answers, threads


def test_alerts_test_gives_up_at_the_deadline_and_the_admin_api_keeps_answering(tmp_path, trickler):
    alerts = {"alertmanager": [{"url": trickler.url}], "timeout_seconds": DEADLINE}
    server = serve_deciding(tmp_path, alerts=alerts)
    try:
        answers, threads = post_alert_tests(server.admin_url, POOL + 2)
        wait_for(lambda: trickler.connections >= 1)
        for _ in range(3):  # while the test alert trickles in, everything else answers
            started = time.monotonic()
            assert requests.get(f"{server.admin_url}/metrics", timeout=2).status_code == 200
            reply = requests.get(f"{server.admin_url}/api/v1/decisions", timeout=2)
            assert reply.status_code == 200
            reply = requests.post(
                f"{server.admin_url}/api/v1/sql", json={"sql": "SELECT 1 AS one"}, timeout=2
            )
            assert reply.status_code == 200
            assert time.monotonic() - started < 2
            time.sleep(0.5)
        for t in threads:
            t.join(60)
        ran = [(seconds, body) for status, seconds, body in answers if status == 200]
        assert len(ran) >= 1
        for seconds, body in ran:
            assert seconds < DEADLINE + 2
            [channel] = body["channels"]
            assert channel["ok"] is False and channel["http_status"] is None
            assert f"within {DEADLINE:g} s (alerts.timeout_seconds)" in channel["error"]
        busy = [body for status, _, body in answers if status == 409]
        assert len(busy) + len(ran) == len(answers)
        assert all("already running" in body["error"] for body in busy)
    finally:
        server.stop()


def test_the_channel_threads_give_up_on_a_trickling_receiver_at_the_deadline(tmp_path, trickler):
    alerts = {
        "alertmanager": [{"url": trickler.url}],
        "webhooks": [{"url": trickler.url + "/hook"}],
        "timeout_seconds": DEADLINE,  # longer than the trickle's gap: each read would succeed
        "max_attempts": 1,
    }
    server = serve_deciding(tmp_path, alerts=alerts)
    try:
        trajectory(server, support_run(server, approve=False))
        firing(server, "QUARANTINE")
        started = time.monotonic()

        def recorded():
            rows = server.query_dicts("SELECT channel, ok, error FROM alerts ORDER BY sent_at")
            first = {r["channel"]: r for r in reversed(rows)}
            return first if len(first) == 2 else None

        rows = wait_for(recorded, timeout=DEADLINE + 5)
        assert time.monotonic() - started < DEADLINE + 5
        assert sorted(rows) == ["alertmanager", "webhook"]
        for row in rows.values():
            assert row["ok"] is False
            assert f"within {DEADLINE:g} s (alerts.timeout_seconds)" in row["error"]
    finally:
        server.stop()
