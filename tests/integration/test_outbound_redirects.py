"""Peers that answer with a redirect to another host: the console's every-replica SQL page
(real Chromium) and the command line's `--cluster` name them as not answering, and never show
the other host's rows as theirs nor send it the token."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from playwright.sync_api import Browser

from tests.integration.test_console_packs import run_query
from tests.support.admin import trajectory
from tests.support.agents import support_run
from tests.support.browser import new_page
from tests.support.cli import sextant_streams
from tests.support.server import FAST, RunningServer, serve


class Redirector:
    """A loopback server answering every request with 307 to the same path on `target`."""

    def __init__(self, target: str) -> None:
        self.seen: list[str] = []
        redirector = self

        class Handler(BaseHTTPRequestHandler):
            def answer(self) -> None:
                redirector.seen.append(self.path)
                self.send_response(307)
                self.send_header("Location", target + self.path)
                self.send_header("Content-Length", "0")
                self.end_headers()

            do_GET = do_POST = answer

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.name = self.url.removeprefix("http://")

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def elsewhere(tmp_path: Path) -> Iterator[tuple[RunningServer, str, Redirector]]:
    """A replica holding one run (reached as `localhost`), and a redirector sending there."""
    server = serve(tmp_path / "elsewhere", assembler=FAST)
    redirector = Redirector(server.admin_url.replace("127.0.0.1", "localhost"))
    try:
        trace_id = support_run(server)
        trajectory(server, trace_id)
        yield server, trace_id, redirector
    finally:
        redirector.close()
        server.stop()


def test_the_sql_page_names_a_peer_that_redirects_elsewhere(
    chromium: Browser, tmp_path: Path, elsewhere: tuple[RunningServer, str, Redirector]
) -> None:
    _, _, redirector = elsewhere
    here = serve(
        tmp_path / "here", assembler=FAST, cluster={"replica": "here", "peers": [redirector.url]}
    )
    try:
        with new_page(chromium) as page:
            page.goto(here.admin_url + "/sql")
            page.check('input[name="cluster"]')
            run_query(page, "SELECT count(*) AS n FROM trajectories")
            rows = page.locator("#rows tbody tr").all_inner_texts()
            assert [r.split("\t") for r in rows] == [["here", "0"]]
            (missing,) = page.locator("#answer .missing").all_inner_texts()
            assert redirector.name in missing and "another origin" in missing
        assert redirector.seen == ["/api/v1/sql"]
    finally:
        here.stop()


def test_cluster_commands_name_a_replica_that_redirects_elsewhere(
    capsys: pytest.CaptureFixture[str], elsewhere: tuple[RunningServer, str, Redirector]
) -> None:
    server, trace_id, redirector = elsewhere
    code, out, err = sextant_streams(
        capsys, "show", trace_id, "--cluster", redirector.url, "--token", "peer-token-1234"
    )
    assert code != 0 and trace_id not in out, out
    assert f"replica {redirector.name} did not answer" in err and "another origin" in err
    code, out, err = sextant_streams(
        capsys, "sql", "SELECT count(*) AS n FROM trajectories", "--cluster",
        f"{server.admin_url},{redirector.url}",
    )  # fmt: skip
    assert code == 1
    assert f"replica {redirector.name} did not answer" in err
    assert redirector.name not in out
