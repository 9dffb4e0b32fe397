"""The console's decision pages, login and forms in real headless Chromium: why a target is
QUARANTINEd, acknowledging it from the page, and who may do so."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import pytest
import requests
from playwright.sync_api import Browser, Page
from prometheus_client import CollectorRegistry

from collector.admin.throttle import FailedLogins, LoginMetrics
from collector.auth import BearerAuth
from collector.config.sections import AdminConfig
from collector.console.access import ConsoleAccess
from tests.support.admin import decisions, firing, trajectory
from tests.support.agents import support_run
from tests.support.browser import new_page, screenshot
from tests.support.captures import CAPTURES, expected_for, send
from tests.support.server import RunningServer, serve_deciding
from tests.support.wait import wait_for

TOKEN = "console-test-token"


def quarantine(server: RunningServer) -> tuple[dict, str]:
    """Two support-desk runs, the second skipping approval: its QUARANTINE and that run."""
    trajectory(server, support_run(server, approve=True))
    bad = support_run(server, approve=False)
    trajectory(server, bad)
    return firing(server, "QUARANTINE"), bad


@pytest.fixture
def quarantined(tmp_path: Path) -> Iterator[tuple[RunningServer, dict, str]]:
    server = serve_deciding(tmp_path)
    try:
        yield server, *quarantine(server)
    finally:
        server.stop()


@pytest.fixture
def guarded(tmp_path: Path) -> Iterator[tuple[RunningServer, dict, str]]:
    """The same, on a collector with `auth.tokens` set."""
    server = serve_deciding(tmp_path, auth={"tokens": [TOKEN]})
    try:
        yield server, *quarantine(server)
    finally:
        server.stop()


def history(server: RunningServer, decision_id: str) -> list[dict]:
    reply = requests.get(
        f"{server.admin_url}/api/v1/decisions/{decision_id}",
        headers=server.auth_headers,
        timeout=5,
    )
    reply.raise_for_status()
    return reply.json()["history"]


def log_in(page: Page, token: str) -> None:
    page.fill('#login input[name="token"]', token)
    page.click('#login button[type="submit"]')


@pytest.mark.parametrize("javascript", [True, False])
def test_the_quarantine_page_says_why_and_links_to_the_run_that_skipped_approval(
    chromium: Browser, quarantined: tuple[RunningServer, dict, str], javascript: bool
) -> None:
    server, decision, bad = quarantined
    with new_page(chromium, javascript) as page:
        page.goto(server.admin_url + "/")
        # the home page's decision badge opens the decision that makes it
        page.click('#targets tr[data-target^="support-desk/"] a[href^="/decisions/"]')
        assert page.url == f"{server.admin_url}/decisions/{decision['decision_id']}"
        assert page.locator("h1 .decision").inner_text() == "QUARANTINE"
        assert page.locator("#state").inner_text() == "firing"
        assert "approval_boundary_violation" in page.locator("#reasons").inner_text()
        assert page.locator("#owner").inner_text() == "support-platform-oncall"
        assert "@" in page.locator("#packs").inner_text()  # name@version
        links = page.locator("#evidence a").evaluate_all("els => els.map(e => e.pathname)")
        assert links == [f"/trajectories/{bad}"]
        firing_stage = page.locator('#timeline li[data-stage="firing"]')
        assert firing_stage.get_attribute("class") == "done"
        assert "UTC" in firing_stage.inner_text()
        assert page.locator('#timeline li[data-stage="resolved"]').get_attribute("class") == "todo"
        if javascript:
            screenshot(page, "decision")


@pytest.mark.parametrize("javascript", [True, False])
def test_acknowledging_from_the_page_records_the_note(
    chromium: Browser, quarantined: tuple[RunningServer, dict, str], javascript: bool
) -> None:
    server, decision, _ = quarantined
    url = f"{server.admin_url}/decisions/{decision['decision_id']}"
    with new_page(chromium, javascript) as page:
        page.goto(url)
        assert "Nobody has acknowledged" in page.locator("#notes").inner_text()
        page.fill('#ack input[name="by"]', "ana")
        page.fill('#ack input[name="note"]', "rolling back <the> release")
        page.click('#ack button[type="submit"]')
        assert page.url == url  # POST, then redirected back to the page
        notes = page.locator("#notes li").all_inner_texts()
        assert len(notes) == 1
        assert "ana" in notes[0] and "rolling back <the> release" in notes[0]
        assert page.locator('#timeline li[data-stage="acked"]').get_attribute("class") == "done"
        assert page.locator("#state").inner_text() == "firing"  # acknowledged, still firing
    acks = [r for r in history(server, decision["decision_id"]) if r["event"] == "ack"]
    assert [(r["actor"], r["note"]) for r in acks] == [("ana", "rolling back <the> release")]


def test_resolving_from_the_page_ends_the_decision_and_removes_the_forms(
    chromium: Browser, quarantined: tuple[RunningServer, dict, str]
) -> None:
    server, decision, _ = quarantined
    with new_page(chromium, javascript=False) as page:
        page.goto(f"{server.admin_url}/decisions/{decision['decision_id']}")
        page.fill('#resolve input[name="by"]', "ana")
        page.fill('#resolve input[name="note"]', "release rolled back")
        page.click('#resolve button[type="submit"]')
        assert page.locator("#state").inner_text() == "resolved"
        assert "by ana" in page.locator('#timeline li[data-stage="resolved"]').inner_text()
        assert page.locator("form#ack, form#resolve").count() == 0
        # the list, filtered to resolved decisions, now holds it
        page.goto(f"{server.admin_url}/decisions?state=resolved&service=support-desk")
        rows = page.locator("#decisions tbody tr")
        assert rows.evaluate_all("rs => rs.map(r => r.dataset.decision)") == [
            decision["decision_id"]
        ]
    assert history(server, decision["decision_id"])[-1]["state"] == "resolved"


def test_with_tokens_a_page_asks_for_a_login_and_the_token_opens_it(
    chromium: Browser, guarded: tuple[RunningServer, dict, str]
) -> None:
    server, decision, bad = guarded
    path = f"/decisions/{decision['decision_id']}"
    with new_page(chromium) as page:
        page.goto(server.admin_url + path)
        assert page.url == f"{server.admin_url}/login?next={quote(path, safe='')}"
        log_in(page, "not-the-token")
        assert "not one of the configured tokens" in page.locator(".error").inner_text()
        log_in(page, TOKEN)
        assert page.url == server.admin_url + path
        assert "approval_boundary_violation" in page.locator("#reasons").inner_text()
        assert page.locator("#evidence a").get_attribute("href") == f"/trajectories/{bad}"
        cookie = next(c for c in page.context.cookies() if c["name"] == "sextant_session")
        assert cookie["httpOnly"] and cookie["sameSite"] == "Strict"
        assert not cookie["secure"]  # plain HTTP here; Secure with admin.tls
        assert TOKEN not in cookie["value"]
        # logging out forgets the session: the page asks again
        page.goto(server.admin_url + "/login")
        page.click('form[action="/logout"] button')
        page.goto(server.admin_url + path)
        assert page.url.startswith(f"{server.admin_url}/login?next=")
    # API clients keep their 401; a browser is sent to the login
    api = requests.get(server.admin_url + path, timeout=5, allow_redirects=False)
    assert api.status_code == 401
    html = {"Accept": "text/html"}
    sent = requests.get(server.admin_url + path, headers=html, timeout=5, allow_redirects=False)
    assert sent.status_code == 303 and sent.headers["Location"].startswith("/login?next=")
    bearer = requests.get(server.admin_url + path, headers=server.auth_headers, timeout=5)
    assert bearer.status_code == 200


def test_a_form_post_without_the_csrf_token_is_refused(
    chromium: Browser, guarded: tuple[RunningServer, dict, str]
) -> None:
    server, decision, _ = guarded
    url = f"{server.admin_url}/decisions/{decision['decision_id']}"
    with new_page(chromium) as page:
        page.goto(url)
        log_in(page, TOKEN)
        csrf = page.locator('#ack input[name="csrf"]').get_attribute("value")
        assert csrf
        # the session cookie alone, as a form on another site would send it
        without = page.request.post(url + "/ack", form={"by": "mallory", "note": "x"})
        assert without.status == 403
        wrong = page.request.post(url + "/ack", form={"by": "mallory", "csrf": "guess"})
        assert wrong.status == 403
        foreign = page.request.post(
            url + "/ack",
            form={"by": "mallory", "csrf": csrf},
            headers={"Origin": "https://elsewhere.example"},
        )
        assert foreign.status == 403
        assert not [r for r in history(server, decision["decision_id"]) if r["event"] == "ack"]
        # the page's own form carries it and goes through
        page.fill('#ack input[name="by"]', "ana")
        page.click('#ack button[type="submit"]')
        assert page.url == url
    acks = [r["actor"] for r in history(server, decision["decision_id"]) if r["event"] == "ack"]
    assert acks == ["ana"]


@pytest.mark.parametrize(
    ("addr", "console", "tokens", "served"),
    [
        ("127.0.0.1:0", "loopback", [], True),
        ("[::1]:0", "loopback", [], True),
        ("0.0.0.0:9464", "loopback", [], False),  # no token, open to the network: not served
        ("0.0.0.0:9464", "loopback", ["t"], True),
        ("0.0.0.0:9464", "always", [], True),
        ("127.0.0.1:0", "off", ["t"], False),
    ],
)
def test_the_console_is_served_on_loopback_or_with_tokens_unless_told(
    addr: str, console: str, tokens: list[str], served: bool
) -> None:
    config = AdminConfig.model_validate({"addr": addr, "console": console})
    throttle = FailedLogins(10, 6.0, lambda: 0.0, LoginMetrics(CollectorRegistry()))
    assert ConsoleAccess(config, BearerAuth(tokens), lambda: 0.0, throttle).served is served


def test_with_the_console_off_its_pages_are_not_found_and_the_api_still_answers(
    tmp_path: Path,
) -> None:
    server = serve_deciding(tmp_path, admin={"console": "off"})
    try:
        home = requests.get(server.admin_url + "/", timeout=5)
        assert home.status_code == 404 and "admin.console" in home.text  # says how to turn it on
        assert requests.get(server.admin_url + "/decisions", timeout=5).status_code == 404
        assert requests.get(server.admin_url + "/api/v1/targets", timeout=5).status_code == 200
    finally:
        server.stop()


def test_the_evidence_bundle_downloads_from_the_decision_page(
    chromium: Browser, quarantined: tuple[RunningServer, dict, str]
) -> None:
    """The same zip as `sextant evidence ID`: the decision, its history, the violating run."""
    import io
    import json
    import zipfile

    server, decision, bad = quarantined
    with new_page(chromium) as page:
        page.goto(f"{server.admin_url}/decisions/{decision['decision_id']}")
        with page.expect_download() as caught:
            page.click("#bundle")
        data = Path(caught.value.path()).read_bytes()
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        names = set(archive.namelist())
        assert {"decision.json", "history.jsonl", "manifest.json"} <= names
        assert f"trajectories/{bad}.json" in names and f"spans/{bad}.jsonl" in names
        current = json.loads(archive.read("decision.json"))
    assert current["decision_id"] == decision["decision_id"]
    assert current["decision"] == "QUARANTINE"
    missing = requests.get(f"{server.admin_url}/decisions/d-nope/evidence.zip", timeout=5)
    assert missing.status_code == 404


MISSING_APPROVAL = [
    CAPTURES / "langgraph-openinference-missing_approval.otlp.json",
    CAPTURES / "python_sdk-genai_semconv-missing_approval.otlp.json",
]


def test_a_decisions_evidence_shows_each_runs_agent_verdict_rules_and_time(
    chromium: Browser, tmp_path: Path
) -> None:
    """Two recorded runs (LangGraph under OpenInference, the plain Python SDK) that changed an
    account without approval: the QUARANTINE cites both, each row saying what the run was."""
    server = serve_deciding(tmp_path)
    try:
        runs = []
        for path in MISSING_APPROVAL:
            send(server, path, "http/json")
            runs.append(trajectory(server, expected_for(path)["trace_id"]))
        decision = wait_for(
            lambda: next(
                (
                    d
                    for d in decisions(server, state="firing", decision="QUARANTINE")
                    if len(d["evidence_trace_ids"]) == 2
                ),
                None,
            ),
            timeout=15,
        )
        assert set(decision["evidence_trace_ids"]) == {r["trace_id"] for r in runs}
        # as the runs read once judged
        by_trace = {r["trace_id"]: trajectory(server, r["trace_id"]) for r in runs}
        with new_page(chromium, javascript=False) as page:
            page.goto(f"{server.admin_url}/decisions/{decision['decision_id']}")
            rows = page.locator("#evidence tbody tr").all()
            assert [r.get_attribute("data-trace") for r in rows] == decision["evidence_trace_ids"]
            for row in rows:
                run = by_trace[row.get_attribute("data-trace") or ""]
                cells = row.locator("td").all_inner_texts()
                assert cells[1] == f"support-desk/{run['agent_name']}/3.1.0"
                assert cells[2] == "fail"
                assert "support-agent/approval-before-account-change" in cells[3]
                assert cells[3] == ", ".join(run["verdict_rules"])
                assert cells[4] == run["start_time"][:19].replace("T", " ") + " UTC"
                assert cells[5] == run["input"]
            rows[-1].locator("a").click()
            page.wait_for_url(f"**/trajectories/{decision['evidence_trace_ids'][-1]}")
            assert page.locator("#trace-id").inner_text() == decision["evidence_trace_ids"][-1]
    finally:
        server.stop()
