"""The console's SQL page asks every replica: its own answer and its peers', each row led by
its replica, a peer that does not answer named above the rows (real Chromium)."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from playwright.sync_api import Browser

from tests.integration.test_console_packs import run_query
from tests.support.admin import trajectory
from tests.support.agents import support_run
from tests.support.browser import new_page
from tests.support.server import FAST, serve


class NotSextant(BaseHTTPRequestHandler):
    """Answers every POST with 200 and JSON that is not the SQL API's (a wrong URL, a proxy)."""

    def do_POST(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(b'{"hello": "world"}')

    def log_message(self, *args: object) -> None:
        pass


def test_the_sql_page_joins_every_replicas_answer(chromium: Browser, tmp_path: Path) -> None:
    peer = serve(tmp_path / "b", assembler=FAST)
    dead = "http://127.0.0.1:1"
    stranger = ThreadingHTTPServer(("127.0.0.1", 0), NotSextant)
    threading.Thread(target=stranger.serve_forever, daemon=True).start()
    odd = f"http://127.0.0.1:{stranger.server_address[1]}"
    # One list for every replica names this one too (its host is its name): left out.
    itself = "http://sextant-a.sextant-replicas.sextant.svc:9464"
    here = serve(
        tmp_path / "a",
        assembler=FAST,
        cluster={"replica": "sextant-a", "peers": [itself, peer.admin_url, dead, odd]},
    )
    try:
        for server, runs in ((here, 1), (peer, 2)):
            for _ in range(runs):
                trajectory(server, support_run(server))
        with new_page(chromium, javascript=True) as page:
            page.goto(here.admin_url + "/sql")
            page.check('input[name="cluster"]')
            run_query(page, "SELECT count(*) AS n FROM trajectories")
            assert page.locator("#rows th").all_inner_texts() == ["replica", "n"]
            rows = page.locator("#rows tbody tr").all_inner_texts()
            assert [r.split("\t") for r in rows] == [
                ["sextant-a", "1"],
                [peer.admin_url.removeprefix("http://"), "2"],
            ]
            missing = page.locator("#answer .missing").all_inner_texts()
            assert len(missing) == 2 and all("its rows are not below" in m for m in missing)
            assert "127.0.0.1:1:" in missing[0] and odd.removeprefix("http://") in missing[1]
            assert page.is_checked('input[name="cluster"]')  # kept for the next query
            assert not any("sextant-a.sextant-replicas" in m for m in missing)
            # Unticked: this replica alone.
            page.uncheck('input[name="cluster"]')
            run_query(page, "SELECT count(*) AS m FROM trajectories")
            assert page.locator("#rows th").all_inner_texts() == ["m"]
            assert page.locator("#rows tbody td").all_inner_texts() == ["1"]
            run_query(page, "SELECT 'x' AS replica")  # a column of that name is not the cluster's
            assert not page.is_checked('input[name="cluster"]')
    finally:
        here.stop()
        peer.stop()
        stranger.shutdown()
