"""The console's pages as one would read them at a desk (real Chromium, recorded runs): times
printed one way with their zone, list rows one line high at 1,400 px, and an unknown address
answered by the console's own page."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
import requests
from playwright.sync_api import Browser, Page

from tests.integration.test_console_sessions import CAPTURED_PACK, MULTI
from tests.integration.test_sessions import session
from tests.support.admin import firing, trajectory
from tests.support.browser import new_page
from tests.support.captures import CAPTURES, send
from tests.support.server import DECIDE_FAST, FAST, RunningServer, serve

# anything that looks like a time: an ISO stamp, a date and clock, or a relative time
TIMEISH = re.compile(
    r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?: ?(?:UTC|Z|[+-]\d{2}:\d{2}))?"
    r"|\b\d+ (?:s|min|h|d) ago\b"
)
ONE_FORMAT = re.compile(r"\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2} UTC")


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    """Recorded sessions and runs, judged by support-desk's pack, and the decision they fire."""
    server = serve(
        tmp_path_factory.mktemp("console-layout"),
        {"support": CAPTURED_PACK},
        assembler=FAST,
        decisions=DECIDE_FAST,
        sessions={"tick_seconds": 0.1},
    )
    try:
        for name in (
            "langgraph-openinference-five_turns",
            "langgraph-openinference-session_stale_approval",
            "python_sdk-genai_semconv-two_services",
        ):
            send(server, MULTI / f"{name}.otlp.json", "http/json")
        send(server, CAPTURES / "langgraph-openinference-booking_ok.otlp.json", "http/json")
        for trace_id in session(server, "thread-5e7c", turns=5)["trace_ids"]:
            trajectory(server, trace_id)
        firing(server, "FAIL", service_name="support-desk")
        yield server
    finally:
        server.stop()


def shown_times(page: Page) -> list[str]:
    """The times in the page's text, leaving out payloads (JSON, attributes, code)."""
    text = page.evaluate(
        """() => {
            const body = document.body.cloneNode(true);
            body.querySelectorAll("pre, code, textarea, .messages, .payload")
                .forEach(e => e.remove());
            return body.innerText;
        }"""
    )
    return TIMEISH.findall(text)


def test_every_page_prints_its_times_one_way_with_the_zone(
    chromium: Browser, recorded: RunningServer
) -> None:
    found = session(recorded, "thread-5e7c", turns=5)
    decision = firing(recorded, "FAIL", service_name="support-desk")
    pages = {
        "/": "#targets",
        "/trajectories": "#trajectories",
        f"/trajectories/{found['trace_ids'][0]}": "h1",
        "/sessions": "#sessions",
        "/sessions/thread-5e7c": "#transcript",
        "/decisions": "#decisions",
        f"/decisions/{decision['decision_id']}": "#timeline",
    }
    with new_page(chromium, javascript=False) as page:
        for path, landmark in pages.items():
            page.goto(recorded.admin_url + path)
            assert page.locator(landmark).count() == 1, path
            times = shown_times(page)
            assert times, f"{path} shows no time"
            odd = [t for t in times if not ONE_FORMAT.fullmatch(t)]
            assert not odd, f"{path} prints {odd}"
            # how long ago, on hover, where the page prints a time in a list
            stamps = page.locator("time[datetime]")
            assert stamps.count() >= 1, path
            assert re.fullmatch(
                r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z",
                stamps.first.get_attribute("datetime") or "",
            )


def test_an_address_the_console_does_not_serve_is_its_own_404_page(
    chromium: Browser, recorded: RunningServer
) -> None:
    with new_page(chromium) as page:
        answer = page.goto(recorded.admin_url + "/decisionz/<img src=x onerror=alert(1)>")
        assert answer is not None and answer.status == 404
        assert page.title() == "Not found · Sextant"
        assert page.locator("header nav a").count() >= 5  # the console's layout, not bare text
        assert "<img src=x onerror=alert(1)>" in page.locator("main code").inner_text()
        assert page.locator("main img").count() == 0
        page.click("main a:has-text('decisions')")
        page.wait_for_url("**/decisions")
        assert page.title() == "Decisions · Sextant"
    api = requests.get(recorded.admin_url + "/api/v1/nothing", timeout=10)
    assert api.status_code == 404
    assert api.headers["Content-Type"].startswith("application/json")
    assert api.json() == {"error": "no API path /api/v1/nothing"}
