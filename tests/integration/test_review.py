"""Human review through the running server: runs of a recorded MCP agent that the MCP pack
cannot judge (the trace names no server) wait in the pack owner's queue; two reviewers with
named tokens work the queue in real Chromium by keyboard alone, never on the same item, and
their labels move the target's decision: the REVIEW clears, a person's fail QUARANTINEs as
the rule's on_fail says."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests
from playwright.sync_api import Browser, Page

from tests.support.admin import decisions, firing, trajectory
from tests.support.browser import new_page, screenshot
from tests.support.captures import send, with_new_trace_ids
from tests.support.paths import TESTDATA
from tests.support.server import DECIDE_FAST, FAST, RunningServer, serve
from tests.support.wait import eventually, wait_for

CAPTURE = TESTDATA / "otlp-multi" / "mcp-mcp_sdk-crm_tools.otlp.json"
EXAMPLES = Path(__file__).parents[2] / "rules" / "examples"
PLAIN = "plain-token-nobody-in-particular"
TOKENS = {"ana": "ana-token-0123456789abcdef", "bo": "bo-token-0123456789abcdef"}
RULE = "support-mcp/known-mcp-servers"


@pytest.fixture
def server(tmp_path: Path) -> Iterator[RunningServer]:
    named = [{"token": token, "name": name} for name, token in TOKENS.items()]
    running = serve(
        tmp_path,
        {"mcp": EXAMPLES / "mcp.yaml"},
        assembler=FAST,
        decisions=DECIDE_FAST,
        auth={"tokens": [PLAIN, *named]},
    )
    yield running
    running.stop()


def api(server: RunningServer, who: str | None, method: str, path: str, **kw) -> requests.Response:
    """As the named reviewer `who`, or with the plain token (None)."""
    token = TOKENS[who] if who else PLAIN
    headers = {"Authorization": f"Bearer {token}"} if server.token else {}
    return requests.request(method, server.admin_url + path, headers=headers, timeout=10, **kw)


def reviewed_runs(server: RunningServer, count: int, who: str | None = "ana") -> list[str]:
    """`count` runs of the recorded agent, each waiting for review, oldest first."""
    sent = []
    for _ in range(count):
        body, traces = with_new_trace_ids(CAPTURE.read_bytes())
        send(server, CAPTURE, "http/json", body)
        sent.extend(traces)

    def waiting() -> list[str] | None:
        items = api(server, who, "GET", "/api/v1/review/queue").json()["items"]
        return [i["trace_id"] for i in items] if len(items) == count else None

    found = wait_for(waiting, timeout=20)
    assert set(found) <= set(sent)
    return found


def log_in(page: Page, server: RunningServer, token: str) -> None:
    """By keyboard: the token, Enter."""
    page.goto(server.admin_url + "/login?next=/review")
    page.focus('#login input[name="token"]')
    page.keyboard.type(token)
    page.keyboard.press("Enter")
    page.wait_for_url(server.admin_url + "/review")


def press(page: Page, key: str, url_part: str = "") -> None:
    """A key that posts a form, then the page it leads to."""
    with page.expect_navigation():
        page.keyboard.press(key)
    assert url_part in page.url


def shown_item(page: Page) -> str:
    return page.locator("h1#item").get_attribute("data-trace") or ""


def test_two_reviewers_share_a_queue_by_keyboard_and_their_labels_decide(
    chromium: Browser, server: RunningServer
) -> None:
    first, second, third = reviewed_runs(server, 3)
    review = firing(server, "REVIEW", service_name="support-desk")
    assert review["owner"] == "agent-security"
    with new_page(chromium) as ana, new_page(chromium) as bo:
        log_in(ana, server, TOKENS["ana"])
        log_in(bo, server, TOKENS["bo"])
        waiting = ana.locator("#queues tr[data-queue='agent-security'] td.num").first
        assert waiting.inner_text() == "3"
        screenshot(ana, "review-queue")
        press(ana, "j", "/review/items/")
        press(bo, "j", "/review/items/")
        assert (shown_item(ana), shown_item(bo)) == (first, second)  # never the same item
        assert ana.locator("#reviewer").inner_text() == "ana"
        # the rule's evidence: the MCP calls to a server the trace does not name
        marked = ana.locator("#steps tr.evidence .name").all_inner_texts()
        assert marked == ["lookup_customer", "update_account"]
        screenshot(ana, "review")

        ana.keyboard.press("c")
        ana.keyboard.type("CRM lookups and an update, as the ticket asked")
        ana.keyboard.press("Escape")
        press(ana, "p", "/review/items/")
        assert shown_item(ana) == third  # the next one bo does not hold

        press(bo, "p", "/review?")  # nothing left that ana does not hold
        assert bo.locator("#done").is_visible()

        ana.keyboard.press("c")
        ana.keyboard.type("update_account on a server nobody approved")
        ana.keyboard.press("Escape")
        press(ana, "f", "/review?")

        bo.goto(server.admin_url + "/review")
        labels = bo.locator("#labels tbody tr")
        assert labels.count() == 3
        assert sorted(bo.locator("#labels td.reviewer").all_inner_texts()) == ["ana", "ana", "bo"]

        # the run's page says who labelled it, and when
        ana.goto(f"{server.admin_url}/trajectories/{third}")
        label = ana.locator("#results tr.label")
        assert label.locator(".badge").inner_text() == "fail"
        assert label.locator(".reviewer").inner_text() == "ana"
        assert label.locator("time").count() == 1

    quarantine = firing(server, "QUARANTINE", service_name="support-desk")
    assert quarantine["reasons"] == ["human_fail"]
    assert quarantine["evidence_trace_ids"] == [third]
    assert "labelled fail in review by ana" in quarantine["summary"]
    with new_page(chromium) as page:  # the decision's page: who labelled its evidence
        log_in(page, server, TOKENS["bo"])
        page.goto(f"{server.admin_url}/decisions/{quarantine['decision_id']}")
        labelled = page.locator(f"#evidence tr[data-trace='{third}'] .labelled").inner_text()
        assert labelled == f"labelled {RULE}: fail by ana"

    def review_resolved() -> None:
        states = {d["decision_id"]: d["state"] for d in decisions(server)}
        assert states[review["decision_id"]] == "resolved"

    eventually(review_resolved, timeout=15)
    rows = server.query_dicts(
        "SELECT trace_id, verdict, reviewer FROM results WHERE source = 'human' ORDER BY verdict"
    )
    assert [(r["verdict"], r["reviewer"]) for r in rows] == [
        ("fail", "ana"),
        ("pass", "ana"),
        ("pass", "bo"),
    ]


def test_the_api_claims_for_one_reviewer_at_a_time_and_refuses_a_token_without_a_name(
    server: RunningServer,
) -> None:
    first, second = reviewed_runs(server, 2)
    claimed = api(server, "ana", "POST", "/api/v1/review/claim", json={}).json()["item"]
    assert (claimed["trace_id"], claimed["claimed_by"]) == (first, "ana")
    assert (
        api(server, "bo", "POST", "/api/v1/review/claim", json={}).json()["item"]["trace_id"]
        == second
    )
    key = {"trace_id": first, "pack": "support-mcp", "rule_id": "known-mcp-servers"}
    held = api(server, "bo", "POST", "/api/v1/review/label", json={**key, "verdict": "pass"})
    assert held.status_code == 409
    assert "ana is reviewing this item" in held.json()["error"]

    anonymous = api(server, None, "POST", "/api/v1/review/label", json={**key, "verdict": "pass"})
    assert anonymous.status_code == 403
    assert "give your token a name in auth.tokens" in anonymous.json()["error"]

    done = api(server, "ana", "POST", "/api/v1/review/label",
               json={**key, "verdict": "not_applicable", "comment": "no MCP here"})  # fmt: skip
    assert done.status_code == 201
    label = done.json()["label"]
    assert (label["reviewer"], label["reason"], label["source"]) == (
        "ana",
        "human_not_applicable",
        "human",
    )
    again = api(server, "bo", "POST", "/api/v1/review/label", json={**key, "verdict": "fail"})
    assert again.status_code == 404
    queue = api(server, "bo", "GET", "/api/v1/review/queue").json()
    assert queue["reviewer"] == "bo"
    assert [(i["trace_id"], i["claimed_by"]) for i in queue["items"]] == [(second, "bo")]
    assert trajectory(server, first)["results"][-1]["reviewer"] == "ana"


def test_a_label_goes_out_as_an_evaluation_event_naming_its_reviewer(tmp_path: Path) -> None:
    receiver = serve(tmp_path / "receiver")
    named = [{"token": token, "name": name} for name, token in TOKENS.items()]
    sender = serve(
        tmp_path / "sender",
        {"mcp": EXAMPLES / "mcp.yaml"},
        assembler=FAST,
        auth={"tokens": [PLAIN, *named]},
        evaluation_events={"endpoint": f"http://{receiver.grpc_endpoint}"},
    )
    try:
        [run] = reviewed_runs(sender, 1)
        key = {"trace_id": run, "pack": "support-mcp", "rule_id": "known-mcp-servers"}
        said = {**key, "verdict": "fail", "comment": "an unknown server"}
        assert api(sender, "bo", "POST", "/api/v1/review/label", json=said).status_code == 201

        def label_event() -> dict | None:
            rows = receiver.query_dicts(
                "SELECT span_id, attributes FROM logs WHERE trace_id = ?"
                " AND event_name = 'gen_ai.evaluation.result'",
                [run],
            )
            found = [
                (r["span_id"], json.loads(r["attributes"]))
                for r in rows
                if json.loads(r["attributes"]).get("sextant.result.source") == "human"
            ]
            return found[0] if found else None

        span_id, attrs = wait_for(label_event, timeout=20)
        assert attrs["gen_ai.evaluation.name"] == RULE
        assert attrs["gen_ai.evaluation.score.label"] == "fail"
        assert attrs["gen_ai.evaluation.explanation"] == "an unknown server"
        assert (attrs["sextant.reviewer"], attrs["sextant.reason"]) == ("bo", "human_fail")
        (answered,) = sender.query(
            "SELECT evidence_span_ids FROM results WHERE trace_id = ? AND source IS NULL"
            " AND rule_id = 'known-mcp-servers'",
            [run],
        )
        assert span_id == answered[0][0]  # on the step the answered result cites
    finally:
        sender.stop()
        receiver.stop()


def test_behind_an_authenticating_proxy_its_header_names_the_reviewer(tmp_path: Path) -> None:
    """`admin.user_header` set: the name the proxy puts there labels; a server without it
    configured never reads the header, so the same request is nobody's."""
    proxied = serve(
        tmp_path / "proxied",
        {"mcp": EXAMPLES / "mcp.yaml"},
        assembler=FAST,
        admin={"user_header": "X-Forwarded-User"},
    )
    try:
        [run] = reviewed_runs(proxied, 1, who=None)
        said = {"trace_id": run, "pack": "support-mcp", "rule_id": "known-mcp-servers",
                "verdict": "pass"}  # fmt: skip
        as_carol = {"X-Forwarded-User": "carol"}
        url = proxied.admin_url + "/api/v1/review/label"
        reply = requests.post(url, json=said, headers=as_carol, timeout=10)
        assert reply.status_code == 201, reply.text
        assert reply.json()["label"]["reviewer"] == "carol"
    finally:
        proxied.stop()
    direct = serve(tmp_path / "direct", {"mcp": EXAMPLES / "mcp.yaml"}, assembler=FAST)
    try:
        [run] = reviewed_runs(direct, 1, who=None)
        said["trace_id"] = run
        url = direct.admin_url + "/api/v1/review/label"
        reply = requests.post(url, json=said, headers=as_carol, timeout=10)
        assert reply.status_code == 403
        assert "admin.user_header" in reply.json()["error"]
    finally:
        direct.stop()


def test_without_scripts_the_buttons_claim_and_label(
    chromium: Browser, server: RunningServer
) -> None:
    """The keys press the page's forms; with scripts off the same forms work by hand."""
    [run] = reviewed_runs(server, 1)
    with new_page(chromium, javascript=False) as page:
        page.goto(server.admin_url + "/login?next=/review")
        page.fill('#login input[name="token"]', TOKENS["bo"])
        page.click('#login button[type="submit"]')
        page.click("#start button")
        assert shown_item(page) == run
        assert page.locator("#claim").inner_text().startswith("claimed by bo")
        page.fill("#comment", "unknown server")
        page.click("#label-fail")
        assert page.locator("#done").is_visible()
        assert page.locator("#labels td.reviewer").all_inner_texts() == ["bo"]
    firing(server, "QUARANTINE", service_name="support-desk")
