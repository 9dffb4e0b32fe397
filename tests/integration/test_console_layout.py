"""The console's pages as one would read them at a desk (real Chromium, recorded runs): times
printed one way with their zone, list rows one line high at 1,400 px, and an unknown address
answered by the console's own page."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from datetime import UTC, datetime

import pytest
import requests
from playwright.sync_api import Browser, Page

from tests.integration.test_console_sessions import CAPTURED_PACK, MULTI
from tests.integration.test_sessions import session
from tests.support.admin import firing, trajectory
from tests.support.browser import new_page
from tests.support.captures import CAPTURES, moved, send
from tests.support.server import DECIDE_FAST, FAST, RunningServer, serve

# anything that looks like a time: an ISO stamp, a date and clock, or a relative time
TIMEISH = re.compile(
    r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?: ?(?:UTC|Z|[+-]\d{2}:\d{2}))?"
    r"|\b\d+ (?:s|min|h|d) ago\b"
)
ONE_FORMAT = re.compile(r"\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2} UTC")
RECORDED = [
    "langgraph-openinference-five_turns",
    "langgraph-openinference-session_stale_approval",
    "python_sdk-genai_semconv-two_services",
]
WRITTEN_AT_NS = int(datetime(2026, 12, 3, 12, 0, tzinfo=UTC).timestamp()) * 10**9


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
        # the captures as they stood against the clock when these tests were written: runs of
        # the last day, the latest hours ago, older ones within the week
        by_ns = time.time_ns() - WRITTEN_AT_NS
        paths = [
            *(MULTI / f"{name}.otlp.json" for name in RECORDED),
            CAPTURES / "langgraph-openinference-booking_ok.otlp.json",
        ]
        for path in paths:
            send(server, path, "http/json", moved(path.read_bytes(), by_ns))
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


# a row of one line of text (14 px type, 1.45 leading, its padding and badges) is under 36 px,
# a wrapped one over 50; the targets' row holds a chart of 26 px with its axis below
ONE_LINE_PX = 40
CHART_ROW_PX = 56
# the texts of a table's cells that break over more than one line (the chart left out)
WRAPPED = """table => {
    const wrapped = [];
    for (const cell of table.querySelectorAll("tbody td")) {
        if (cell.querySelector(".chart")) continue;
        const texts = document.createTreeWalker(cell, NodeFilter.SHOW_TEXT);
        for (let node = texts.nextNode(); node; node = texts.nextNode()) {
            if (!node.textContent.trim()) continue;
            const range = document.createRange();
            range.selectNodeContents(node);
            const tops = new Set([...range.getClientRects()].map(r => Math.round(r.top)));
            if (tops.size > 1) wrapped.push(node.textContent.trim());
        }
    }
    return wrapped;
}"""


@pytest.mark.parametrize(
    ("path", "table", "bound"),
    [
        ("/", "#targets", CHART_ROW_PX),
        ("/trajectories", "#trajectories", ONE_LINE_PX),
        ("/sessions", "#sessions", ONE_LINE_PX),
        ("/decisions", "#decisions", ONE_LINE_PX),
    ],
)
def test_list_rows_are_one_line_high_on_a_1400_px_screen(
    chromium: Browser, recorded: RunningServer, path: str, table: str, bound: int
) -> None:
    with new_page(chromium, javascript=False) as page:
        page.set_viewport_size({"width": 1400, "height": 900})
        page.goto(recorded.admin_url + path)
        rows = page.locator(f"{table} tbody tr").all()
        assert rows, path
        heights = [(row.bounding_box() or {"height": 0})["height"] for row in rows]
        assert max(heights) <= bound, f"{path}: rows {heights} px high"
        assert page.locator(table).evaluate(WRAPPED) == [], path
        # ... without pushing the table past the screen's edge instead
        width = page.evaluate("document.documentElement.scrollWidth")
        assert width <= 1400, f"{path} is {width} px wide"
        # text cut short keeps its whole on hover
        for cell in page.locator(f"{table} td.clip").all():
            shown = cell.evaluate("c => c.scrollWidth > c.clientWidth")
            if shown:
                assert cell.get_attribute("title"), path


def test_the_targets_page_looks_back_over_the_chosen_range_and_reloads_itself(
    chromium: Browser, recorded: RunningServer
) -> None:
    support = '#targets tr[data-target^="support-desk/"] td'
    with new_page(chromium, javascript=False) as page:
        page.goto(recorded.admin_url + "/")
        assert page.locator('meta[http-equiv="refresh"]').count() == 0
        day = page.locator(support).all_inner_texts()
        assert int(day[8]) > int(day[6])  # the recorded threads began hours ago
        # the chart says what it plots and its scale: the most runs in an hour over 0, 24 h back
        legend = page.locator("#targets thead th").filter(has=page.locator(".key.fails"))
        assert legend.inner_text().split() == ["runs", "fails", "per", "hour"]
        chart = page.locator(f"{support} .chart")
        top, bottom = chart.locator(".y > span").all_inner_texts()
        assert 1 <= int(top) <= int(day[8]) and bottom == "0"
        assert chart.locator(".x").inner_text().split() == ["−24", "h", "now"]
        page.select_option('#view select[name="range"]', "1h")
        page.select_option('#view select[name="refresh"]', "30s")
        page.click('#view button[type="submit"]')
        page.wait_for_url("**/?range=1h&refresh=30s")
        hour = page.locator(support).all_inner_texts()
        assert hour[8] == hour[6] == day[6]  # over the last hour: the hour's runs
        assert "last 1 h" in page.locator("#targets thead").inner_text()
        assert "per 5 min" in page.locator("#targets thead").inner_text()
        assert chart.locator(".x").inner_text().split() == ["−1", "h", "now"]
        refresh = page.locator('meta[http-equiv="refresh"]')
        assert refresh.get_attribute("content") == "30"
        assert "reloads every 30s" in page.locator("#as-of").inner_text()
        assert page.locator('#view select[name="range"]').input_value() == "1h"
        page.goto(recorded.admin_url + "/?range=7d")
        week = page.locator(support).all_inner_texts()
        assert int(week[8]) >= int(day[8])
        assert page.locator('meta[http-equiv="refresh"]').count() == 0
    wrong = requests.get(recorded.admin_url + "/?range=2y", timeout=10)
    assert wrong.status_code == 400 and "range is one of 1h, 6h, 24h, 7d" in wrong.text
