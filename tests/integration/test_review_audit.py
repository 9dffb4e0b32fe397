"""Audits through the running server: runs sent by the real OTel SDK that a pack with
`review.audit.sample: 1.0` passed (a scripted judge found them helpful) wait in the owner's
queue as audits; a reviewer's fail on one QUARANTINEs the target as the judge rule's own failure
would; passes on the others give `sextant judge calibrate --from-reviews` the runs the judge
passed rightly (true negatives), which REVIEW items alone never show it; and a reviewer adds an
item's run, and a filtered queue's runs, to a dataset from the review pages in real Chromium."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from playwright.sync_api import Browser, Page

from collector.bench.judge import ScriptedJudge, start_judge
from tests.support.admin import decisions, firing
from tests.support.agents import AgentScript, provider_for, trace_id_of
from tests.support.browser import new_page, screenshot
from tests.support.cli import sextant_streams
from tests.support.server import DECIDE_FAST, FAST, RunningServer, serve
from tests.support.wait import wait_for

KEY_ENV = "SEXTANT_TEST_JUDGE_KEY"
TOKENS = {"ana": "ana-token-0123456789abcdef", "bo": "bo-token-0123456789abcdef"}
PACK = "support-judges"
JUDGE, PRESENCE = "helpful-answer", "looks-the-customer-up"
QUEUE = {"owner": "support-sre", "pack": PACK}


def audited_pack(url: str) -> str:
    return f"""
name: {PACK}
version: 1.0.0
owner: support-sre
selector: {{service: support-desk}}
review: {{sla: 1h, audit: {{sample: 1.0}}}}
judges:
  endpoint: {{base_url: "{url}", model: judge-mini, api_key_env: {KEY_ENV}, timeout: 5s}}
rules:
  - id: {JUDGE}
    type: judge
    reason: unhelpful_answer
    on_fail: QUARANTINE
    prompt: "Grade the support agent's answer: {{{{ answer }}}}"
    pass_when: {{score_gte: 0.5}}
  - id: {PRESENCE}
    type: presence
    reason: no_lookup
    step: {{kind: tool, name: lookup_customer}}
"""


@pytest.fixture
def judge_server() -> Iterator[ScriptedJudge]:
    scripted = start_judge()
    yield scripted
    scripted.close()


@pytest.fixture
def server(
    tmp_path: Path, judge_server: ScriptedJudge, monkeypatch: pytest.MonkeyPatch
) -> Iterator[RunningServer]:
    monkeypatch.setenv(KEY_ENV, "sk-test-judge")
    named = [{"token": token, "name": name} for name, token in TOKENS.items()]
    running = serve(
        tmp_path,
        {"judges": audited_pack(judge_server.base_url)},
        assembler=FAST,
        decisions={**DECIDE_FAST, "review_backlog_seconds": 0.1},
        judges={"tick_seconds": 600},
        auth={"tokens": named},
    )
    yield running
    running.stop()


def helpful_run(server: RunningServer) -> str:
    """A support-desk run the judge finds helpful and that looks the customer up: it passes."""
    headers = {k.lower(): v for k, v in server.auth_headers.items()}
    exporter = OTLPSpanExporter(endpoint=server.grpc_endpoint, insecure=True, headers=headers)
    provider = provider_for(exporter, service="support-desk")
    script = AgentScript(provider.get_tracer("support"))
    with script.agent("support-agent", "Where is my parcel?", "GOOD: it arrives today") as root:
        script.chat([("lookup_customer", {"customer": "C-1"})])
        script.tool("lookup_customer", {"customer": "C-1"}, "parcel P-7 left the depot")
        script.chat()
    provider.shutdown()
    return trace_id_of(root)


def api(server: RunningServer, who: str, method: str, path: str, **kw) -> requests.Response:
    headers = {"Authorization": f"Bearer {TOKENS[who]}"}
    return requests.request(method, server.admin_url + path, headers=headers, timeout=10, **kw)


def audits_waiting(server: RunningServer, count: int) -> list[dict]:
    def listed() -> list[dict] | None:
        reply = api(server, "ana", "GET", "/api/v1/review/queue", params={"kind": "audit"})
        items = reply.json()["items"]
        return items if len(items) == count else None

    return wait_for(listed, timeout=20)


def label(server: RunningServer, who: str, trace_id: str, rule: str, verdict: str) -> None:
    said = {"trace_id": trace_id, "pack": PACK, "rule_id": rule, "verdict": verdict}
    reply = api(server, who, "POST", "/api/v1/review/label", json=said)
    assert reply.status_code == 201, reply.text


def test_passed_runs_audited_by_people_decide_and_calibrate_the_judge(
    server: RunningServer, capsys: pytest.CaptureFixture[str]
) -> None:
    runs = [helpful_run(server) for _ in range(3)]
    items = audits_waiting(server, 6)  # both rules of each run
    assert {(i["trace_id"], i["rule_id"]) for i in items} == {
        (t, r) for t in runs for r in (JUDGE, PRESENCE)
    }
    assert {(i["kind"], i["verdict"], i["queue"]) for i in items} == {
        ("audit", "pass", "support-sre")
    }
    # Nothing asked for a review: no REVIEW item, no backlog, no decision; the audits are
    # counted apart on /metrics.
    queue = api(server, "ana", "GET", "/api/v1/review/queue").json()
    assert [(q["queue"], q["waiting"], q["audit"]) for q in queue["queues"]] == [
        ("support-sre", 6, 6)
    ]
    wait_for(lambda: server.metric("sextant_review_audit_items", QUEUE) == 6.0, timeout=10)
    assert server.metric("sextant_review_queue_items", QUEUE) == 0.0
    assert decisions(server, state="firing") == []

    first, *others = runs
    label(server, "ana", first, JUDGE, "fail")  # helpful, said the judge; not so, says ana
    quarantine = firing(server, "QUARANTINE", service_name="support-desk")
    assert quarantine["reasons"] == ["human_fail"]
    assert quarantine["evidence_trace_ids"] == [first]
    assert "labelled fail in review by ana" in quarantine["summary"]
    for run in others:
        label(server, "bo", run, JUDGE, "pass")
    audits_waiting(server, 3)  # the presence rule's audits still wait

    code, out, err = sextant_streams(
        capsys, "judge", "calibrate", f"{PACK}/{JUDGE}", "--from-reviews",
        "--url", server.admin_url, "--token", TOKENS["ana"], "--json",
    )  # fmt: skip
    assert code in (0, 1), err
    card = json.loads(out)
    assert (card["source"], card["cases"], card["positives"], card["negatives"]) == (
        "reviews",
        3,
        1,  # the run ana failed, which the judge passed: a miss
        2,  # the runs bo passed, which the judge passed too: true negatives
    )
    assert card["tnr"] == 1.0 and card["tpr"] == 0.0


def log_in(page: Page, server: RunningServer, who: str, then: str) -> None:
    page.goto(f"{server.admin_url}/login?next={then}")
    page.fill('#login input[name="token"]', TOKENS[who])
    with page.expect_navigation():
        page.keyboard.press("Enter")


def test_a_reviewer_adds_an_items_run_and_a_filtered_queues_runs_to_a_dataset(
    server: RunningServer, chromium: Browser
) -> None:
    runs = [helpful_run(server) for _ in range(2)]
    audits_waiting(server, 4)
    with new_page(chromium) as page:
        log_in(page, server, "bo", "/review?kind=audit")
        assert page.locator("#items tbody tr[data-kind='audit']").count() == 4
        with page.expect_navigation():
            page.keyboard.press("j")  # claims the oldest audit
        item = page.locator("h1#item")
        assert item.get_attribute("data-kind") == "audit"
        assert page.locator("#audit").inner_text() == "audit"
        trace = item.get_attribute("data-trace")
        assert "d\nadd the run to a dataset" in page.locator("#keys").inner_text()
        screenshot(page, "review-audit")
        page.keyboard.press("d")  # the dataset form's name, by keyboard
        page.keyboard.type("audited-parcels")
        with page.expect_navigation():
            page.keyboard.press("Enter")
        assert "/review/items/" in page.url  # back on the item, to go on reviewing
        assert page.locator("#added").inner_text() == "Added the run to dataset audited-parcels."
        assert page.locator("h1#item").get_attribute("data-trace") == trace

        # The queue filtered to one rule's audits: add these items' runs.
        page.goto(f"{server.admin_url}/review?kind=audit&rule={PRESENCE}")
        screenshot(page, "review-audit-queue")
        form = page.locator("form#add-dataset")
        assert form.locator("button").inner_text() == "Add these items' runs to dataset"
        form.locator("input[name=name]").fill("parcels-looked-up")
        with page.expect_navigation():
            form.locator("button").click()
        assert page.url.endswith("/datasets/parcels-looked-up")

        # The run's page marks the results sampled for audit.
        page.goto(f"{server.admin_url}/trajectories/{trace}")
        audited = page.locator("#results tr:not(.label) .badge.audit")
        assert audited.count() == 2  # both rules of the pack

    one = api(server, "bo", "GET", "/api/v1/datasets/audited-parcels").json()["cases"]
    assert [(c["trace_id"], c["added_by"]) for c in one] == [(trace, "bo")]
    both = api(server, "bo", "GET", "/api/v1/datasets/parcels-looked-up").json()["cases"]
    assert sorted(c["trace_id"] for c in both) == sorted(runs)
