"""The console's session pages (real Chromium): the sessions list a page at a time, a session
whose third turn wrote on a stale approval, its finding linking the two turns it names, and a
five-turn LangGraph thread recorded under OpenInference read as its transcript."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import requests
from playwright.sync_api import Browser

from tests.integration.test_sessions import PACK, Conversation, session
from tests.support.admin import trajectory
from tests.support.browser import new_page, screenshot
from tests.support.captures import send
from tests.support.paths import TESTDATA
from tests.support.server import DECIDE_FAST, FAST, RunningServer, serve
from tests.support.wait import wait_for


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
            assert page.locator("#transcript .turn").count() == 3
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


MULTI = TESTDATA / "otlp-multi"
# support-desk's own tools; its session rule counts turns (billing-desk's sessions have none)
CAPTURED_PACK = """
name: support-desk
version: "1"
owner: support-oncall
selector: {service: support-desk}
rules:
  - id: own-tools
    type: absence
    allowed_tools: [lookup_order, search_kb, request_approval, refund_order]
    reason: tool_outside_allow_list
    on_fail: FAIL
  - id: session-turns
    type: budget
    scope: session
    max_turns: 6
    reason: session_too_long
"""
# the five turns of langgraph-openinference-five_turns (scripts/record-captures/five_turns.py)
FIVE_TURNS = [
    (
        "Where is my order? I am customer C-1042.",
        ["lookup_order"],
        "Your order O-7781 shipped on 2026-11-28 and should arrive by 2026-12-03.",
    ),
    (
        "What is the refund policy for gold customers?",
        ["search_kb"],
        "Gold customers get a full refund within 30 days of purchase.",
    ),
    (
        "Please refund order O-7781.",
        ["request_approval", "refund_order"],
        "Done: order O-7781 is refunded (approved by lead-7), 189.00 EUR back to your card.",
    ),
    (
        "How long until I see the money?",
        [],
        "Card refunds usually appear within 5 to 7 business days.",
    ),
    (
        "Can you e-mail me the receipt?",
        ["send_receipt"],
        "The refund receipt for O-7781 is on its way to your e-mail.",
    ),
]
SESSIONS = {  # (session, service) of every captured session sent
    ("thread-5e7c", "support-desk"),
    ("thread-7f3a", "support-desk"),
    ("thread-9c21", "support-desk"),
    ("user-4711-9f2c", "support-desk"),
    ("user-4711-9f2c", "billing-desk"),
}


def service_session(server: RunningServer, session_id: str, service: str, turns: int) -> dict:
    """The session of `service` once it holds `turns` turns (the id alone names two)."""

    def fetch() -> dict | None:
        reply = requests.get(
            f"{server.admin_url}/api/v1/sessions/{session_id}",
            params={"service": service},
            timeout=5,
        )
        return reply.json() if reply.ok and reply.json()["turns"] == turns else None

    return wait_for(fetch, timeout=15)


@pytest.fixture(scope="module")
def captured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    """Captured sessions: the five-turn thread, two three-turn threads, and one conversation id
    used by two services."""
    server = serve(
        tmp_path_factory.mktemp("console-sessions"),
        {"support": CAPTURED_PACK},
        assembler=FAST,
        sessions={"tick_seconds": 0.1},
    )
    try:
        for name in (
            "langgraph-openinference-five_turns",
            "langgraph-openinference-session_stale_approval",
            "langgraph-openinference-session_renewed_approval",
            "python_sdk-genai_semconv-two_services",
        ):
            send(server, MULTI / f"{name}.otlp.json", "http/json")
        found = session(server, "thread-5e7c", turns=5, verdict="pass")
        for thread in ("thread-7f3a", "thread-9c21"):
            session(server, thread, turns=3)
        service_session(server, "user-4711-9f2c", "billing-desk", turns=3)
        service_session(server, "user-4711-9f2c", "support-desk", turns=1)
        for trace_id in found["trace_ids"]:
            trajectory(server, trace_id)
        yield server
    finally:
        server.stop()


def test_a_five_turn_session_reads_as_its_transcript(
    chromium: Browser, captured: RunningServer
) -> None:
    found = session(captured, "thread-5e7c", turns=5)
    with new_page(chromium, javascript=False) as page:
        page.goto(captured.admin_url + "/sessions")
        assert page.locator('#sessions tr[data-session="thread-5e7c"]').count() == 1
        screenshot(page, "sessions")
        page.goto(captured.admin_url + "/sessions/thread-5e7c")
        assert "verdict pass" in page.locator("#summary").inner_text()
        screenshot(page, "session")
        turns = page.locator("#transcript .turn").all()
        assert len(turns) == 5
        for turn, trace_id, (question, tools, answer) in zip(
            turns, found["trace_ids"], FIVE_TURNS, strict=True
        ):
            assert turn.locator(".role-user .text").inner_text() == question
            assert turn.locator(".role-assistant .text").inner_text() == answer
            assert turn.locator(".tools-used code.tool").all_inner_texts() == tools
            if not tools:
                assert turn.locator(".tools-used").inner_text() == "no tool"
            link = turn.locator("a.turn-link")
            assert link.get_attribute("href") == f"/trajectories/{trace_id}"
        verdicts = [t.locator(".turn-head .verdict").inner_text() for t in turns]
        assert verdicts == ["pass", "pass", "pass", "pass", "fail"]
        assert turns[4].locator(".rules").inner_text() == "support-desk/own-tools"
        turns[2].locator("a.turn-link").click()
        page.wait_for_url(f"**/trajectories/{found['trace_ids'][2]}")
        assert page.locator("#steps tr[data-name='refund_order']").count() == 1


def test_a_session_no_rule_judged_says_so_and_shows_its_failed_calls(
    chromium: Browser, captured: RunningServer
) -> None:
    with new_page(chromium, javascript=False) as page:
        page.goto(captured.admin_url + "/sessions?service=billing-desk")
        row = page.locator("#sessions tbody tr")
        assert row.count() == 1
        assert row.locator("td").nth(3).inner_text() == "no session rule"
        row.locator("a").first.click()
        summary = page.locator("#summary").inner_text()
        assert "no session rule has judged it" in summary and "none" not in summary
        first = page.locator("#transcript .turn").first
        assert first.locator(".tools-used code.tool").all_inner_texts() == [
            "request_approval",
            "charge_card (1 failed)",
        ]


def test_the_session_list_pages(chromium: Browser, captured: RunningServer) -> None:
    seen: list[tuple[str, str]] = []
    with new_page(chromium, javascript=False) as page:
        page.goto(captured.admin_url + "/sessions?limit=2")
        sizes = []
        while True:
            rows = page.locator("#sessions tbody tr").all()
            sizes.append(len(rows))
            for row in rows:
                href = row.locator("a").first.get_attribute("href") or ""
                service = href.rpartition("service=")[2].replace("%2A", "*")
                seen.append((row.get_attribute("data-session") or "", service))
            following = page.locator("#next-page")
            if not following.count():
                break
            following.click()
            page.wait_for_load_state()
            assert page.locator("#first-page").count() == 1
        assert sizes == [2, 2, 1]
        assert len(seen) == len(set(seen)) and set(seen) == SESSIONS
        page.goto(captured.admin_url + "/sessions?cursor=nonsense")
        assert "cursor" in page.locator("[role=alert]").inner_text()
