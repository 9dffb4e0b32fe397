"""The console's session pages (real Chromium): the sessions list, and a session whose third
turn wrote on a stale approval, its finding linking the two turns it names."""

from __future__ import annotations

from pathlib import Path

from playwright.sync_api import Browser

from tests.integration.test_sessions import PACK, Conversation, session
from tests.support.browser import new_page
from tests.support.server import DECIDE_FAST, FAST, serve


def test_a_sessions_finding_links_its_turns(chromium: Browser, tmp_path: Path) -> None:
    server = serve(
        tmp_path,
        {"sessions": PACK},
        assembler=FAST,
        decisions=DECIDE_FAST,
        sessions={"tick_seconds": 0.1},
    )
    try:
        talk = Conversation(server, "conv-console", "2.4.0")
        first = talk.turn("Change my e-mail.", write=True, approve=True, ago=1200)
        talk.turn("What is the refund policy?", ago=900)
        third = talk.turn("Set it again.", write=True)
        session(server, "conv-console", turns=3, verdict="fail")
        with new_page(chromium, javascript=False) as page:
            page.goto(server.admin_url + "/sessions?verdict=fail")
            row = page.locator('#sessions tr[data-session="conv-console"] td').all_inner_texts()
            assert row[1] == "open" and row[3] == "fail" and row[5] == "3"
            assert "support-sessions/fresh-approval" in row[4]
            page.click('#sessions a:has-text("conv-console")')
            assert page.title() == "Session conv-console · Sextant"
            assert page.locator("#turns tbody tr").count() == 3
            finding = page.locator("#findings li").inner_text()
            assert "stale_approval" in finding and "not covered by an approval" in finding
            links = page.locator("#findings li a")
            assert links.all_inner_texts() == ["1", "3"]
            assert [links.nth(i).get_attribute("href") for i in range(2)] == [
                f"/trajectories/{first}",
                f"/trajectories/{third}",
            ]
            links.nth(1).click()
            assert third in page.url and "update_account" in page.content()
            page.goto(server.admin_url + "/sessions/nope")
            assert "No session" in page.locator("h1").inner_text()
    finally:
        server.stop()
