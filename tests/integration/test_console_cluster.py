"""The console's SQL page asks every replica: its own answer and its peers', each row led by
its replica, a peer that does not answer named above the rows (real Chromium)."""

from __future__ import annotations

from pathlib import Path

from playwright.sync_api import Browser

from tests.integration.test_console_packs import run_query
from tests.support.admin import trajectory
from tests.support.agents import support_run
from tests.support.browser import new_page
from tests.support.server import FAST, serve


def test_the_sql_page_joins_every_replicas_answer(chromium: Browser, tmp_path: Path) -> None:
    peer = serve(tmp_path / "b", assembler=FAST)
    dead = "http://127.0.0.1:1"
    here = serve(
        tmp_path / "a",
        assembler=FAST,
        cluster={"replica": "sextant-a", "peers": [peer.admin_url, dead]},
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
            missing = page.locator("#answer .missing").inner_text()
            assert "127.0.0.1:1" in missing and "its rows are not below" in missing
            assert page.is_checked('input[name="cluster"]')  # kept for the next query
            # Unticked: this replica alone.
            page.uncheck('input[name="cluster"]')
            run_query(page, "SELECT count(*) AS m FROM trajectories")
            assert page.locator("#rows th").all_inner_texts() == ["m"]
            assert page.locator("#rows tbody td").all_inner_texts() == ["1"]
    finally:
        here.stop()
        peer.stop()
