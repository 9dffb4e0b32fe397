"""Guessing tokens on the admin port: wrong ones are throttled per client address (the right one
too, while throttled), counted in /metrics; a short token does not start at all."""

from __future__ import annotations

import http.client
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests

from tests.support.admin import scraped
from tests.support.process import EPHEMERAL
from tests.support.server import RunningServer, serve
from tests.support.wait import wait_for

TOKEN = "the-right-token-0123456789"
BURST = 10


@pytest.fixture
def guarded(tmp_path: Path) -> Iterator[RunningServer]:
    server = serve(
        tmp_path,
        auth={"tokens": [TOKEN]},
        admin={"login_burst": BURST, "login_refill_seconds": 1.0},
    )
    try:
        yield server
    finally:
        server.stop()


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def from_another_address(server: RunningServer, path: str, token: str) -> int:
    """The status of GET `path` sent from 127.0.0.2: another client on the same machine."""
    connection = http.client.HTTPConnection(
        "127.0.0.1", server.pipeline.admin.port, timeout=5, source_address=("127.0.0.2", 0)
    )
    try:
        connection.request("GET", path, headers=bearer(token))
        return connection.getresponse().status
    finally:
        connection.close()


def test_300_wrong_bearer_tokens_then_the_right_one_is_throttled(guarded: RunningServer) -> None:
    url = guarded.admin_url + "/api/v1/targets"
    with requests.Session() as session:
        answers = [
            session.get(url, headers=bearer(f"guess-{n:04d}-0123456789"), timeout=5).status_code
            for n in range(300)
        ]
        assert answers[:BURST] == [401] * BURST
        assert set(answers[BURST:]) == {429}
        right = session.get(url, headers=bearer(TOKEN), timeout=5)
        assert right.status_code == 429  # not read while throttled: the answer tells nothing
        assert 1 <= int(right.headers["Retry-After"]) <= 2
        assert from_another_address(guarded, "/api/v1/targets", TOKEN) == 200  # per client
        assert scraped(guarded, "sextant_admin_auth_failures_total", reason="wrong_token") == BURST
        throttled = scraped(guarded, "sextant_admin_auth_failures_total", reason="throttled")
        assert throttled is not None and throttled >= 300 - BURST + 1
        # one more try a second (login_refill_seconds): the right token opens again
        wait_for(lambda: session.get(url, headers=bearer(TOKEN), timeout=5).status_code == 200)


def test_the_console_login_is_throttled_like_the_api(guarded: RunningServer) -> None:
    url = guarded.admin_url + "/login"
    with requests.Session() as session:
        for n in range(BURST):
            wrong = session.post(url, data={"token": f"wrong-{n}"}, timeout=5)
            assert wrong.status_code == 401 and "not one of the configured tokens" in wrong.text
        refused = session.post(url, data={"token": TOKEN}, timeout=5, allow_redirects=False)
        assert refused.status_code == 429 and "Too many wrong tokens" in refused.text
        assert 1 <= int(refused.headers["Retry-After"]) <= 2
        assert "sextant_session" not in refused.cookies
        # the API shares the count: this address is throttled there too
        api = session.get(guarded.admin_url + "/api/v1/targets", headers=bearer(TOKEN))
        assert api.status_code == 429
        assert scraped(guarded, "sextant_admin_auth_failures_total", reason="wrong_token") == BURST

        def log_in() -> requests.Response | None:
            reply = session.post(url, data={"token": TOKEN}, timeout=5, allow_redirects=False)
            return reply if reply.status_code == 303 else None

        assert "sextant_session" in wait_for(log_in).cookies  # a try a second again


@pytest.mark.parametrize(
    ("where", "value"),
    [("env", "x"), ("env", "fifteen-chars-x"), ("file", "s3cr3t-7"), ("file", "")],
    ids=repr,
)
def test_a_token_shorter_than_16_characters_stops_serve_naming_the_key(
    tmp_path: Path, where: str, value: str
) -> None:
    config = tmp_path / "sextant.yaml"
    env = dict(os.environ)
    if where == "env":
        env["SEXTANT_AUTH__TOKENS"] = f"long-enough-token-0123, {value}"
        config.write_text("{}\n")
    else:
        config.write_text(f'auth:\n  tokens: ["long-enough-token-0123", "{value}"]\n')
    done = subprocess.run(
        [sys.executable, "-m", "collector.cli", "serve", "--config", str(config), *EPHEMERAL],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2, done.stderr
    assert "auth.tokens" in done.stderr and "at least 16" in done.stderr
    if len(value) >= 5:
        assert value not in done.stderr  # the token itself is never printed
