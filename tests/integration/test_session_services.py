"""Two services that reuse a conversation id, sent by two real OTel SDK providers: each service
has its own session, judged only by the packs that select it; a turn stamped far ahead cannot
silence a session, and an approval that arrives after a failed write, stamped before it, does
not turn the failure into a pass."""

from __future__ import annotations

from pathlib import Path

import pytest
import requests

from tests.support.admin import decisions, firing, scraped
from tests.support.captures import send
from tests.support.conversations import Call, Service
from tests.support.paths import TESTDATA
from tests.support.server import DECIDE_FAST, FAST, RunningServer, serve
from tests.support.wait import wait_for

PACK = """
name: support-sessions
version: "1"
owner: support-oncall
selector: {service: support-desk}
approvals: {tools: [request_approval]}
rules:
  - id: fresh-approval
    type: approval_lifetime
    writes: {kind: tool, name: "update_*"}
    max_age: 10m
    same_resource: ["$.customer"]
    reason: stale_approval
    on_fail: QUARANTINE
  - id: failing-tools
    type: repeated_failures
    min_turns: 2
    reason: repeated_tool_failure
    on_fail: DOWNGRADE
"""
LOOKUP = Call("lookup_customer", {"customer": "C-1"}, '{"tier": "gold"}')
APPROVE = Call("request_approval", {"customer": "C-1"}, '{"approved": true}')
WRITE = Call("update_account", {"customer": "C-1", "email": "m@x.org"})
CHARGE_FAILS = Call("charge_card", {"customer": "C-1"}, error="CardDeclined")
DAY = 86400.0


@pytest.fixture
def server(tmp_path: Path):
    running = serve(
        tmp_path,
        {"sessions": PACK},
        assembler=FAST,
        decisions=DECIDE_FAST,
        sessions={"tick_seconds": 0.1},
    )
    yield running
    running.stop()


def sessions_of(server: RunningServer, conversation: str, count: int) -> dict[str, dict]:
    """service -> its session of `conversation`, once there are `count` of them."""

    def fetch() -> dict[str, dict] | None:
        listed = requests.get(f"{server.admin_url}/api/v1/sessions", timeout=5).json()["sessions"]
        found = {s["session_service"]: s for s in listed if s["session_id"] == conversation}
        return found if len(found) == count else None

    return wait_for(fetch, timeout=15)


def one(server: RunningServer, conversation: str, service: str, **expect: object) -> dict:
    def fetch() -> dict | None:
        reply = requests.get(
            f"{server.admin_url}/api/v1/sessions/{conversation}",
            params={"service": service},
            timeout=5,
        )
        if reply.status_code != 200:
            return None
        found = reply.json()
        return found if all(found[k] == v for k, v in expect.items()) else None

    return wait_for(fetch, timeout=15)


def test_another_services_approval_does_not_cover_a_write(server: RunningServer) -> None:
    support = Service(server, "support-desk", "4.0.0")
    billing = Service(server, "billing-desk", "1.0.0", agent="billing-agent")
    conversation = "user-4711-approval"
    billing.turn(conversation, [LOOKUP, APPROVE], ago=60)
    written = support.turn(conversation, [LOOKUP, WRITE])

    d = firing(server, "QUARANTINE", service_version="4.0.0")
    assert d["reasons"] == ["stale_approval"] and d["evidence_trace_ids"] == [written]
    both = sessions_of(server, conversation, 2)
    assert both["support-desk"]["trace_ids"] == [written]
    assert both["billing-desk"]["turns"] == 1
    assert both["support-desk"]["verdict"] == "fail"
    assert both["billing-desk"]["verdict"] == "none"  # no pack selects billing-desk
    # the id alone names two sessions: the API says which services, and each answers
    ambiguous = requests.get(f"{server.admin_url}/api/v1/sessions/{conversation}", timeout=5)
    assert ambiguous.status_code == 409
    assert "billing-desk, support-desk" in ambiguous.json()["error"]
    found = one(server, conversation, "support-desk")
    assert [r["verdict"] for r in found["results"] if r["rule_id"] == "fresh-approval"] == ["fail"]


def test_another_services_failures_do_not_count_against_a_session(
    server: RunningServer,
) -> None:
    support = Service(server, "support-desk", "4.1.0")
    billing = Service(server, "billing-desk", "1.1.0", agent="billing-agent")
    conversation = "user-4711-failures"
    billing.turn(conversation, [CHARGE_FAILS], ago=30)
    billing.turn(conversation, [CHARGE_FAILS], ago=20)
    answered = support.turn(conversation, [LOOKUP])

    found = one(server, conversation, "support-desk", turns=1)
    assert found["trace_ids"] == [answered] and found["verdict"] == "pass", found["results"]
    rounds = scraped(server, "sextant_decision_evaluations_total") or 0
    wait_for(lambda: (scraped(server, "sextant_decision_evaluations_total") or 0) >= rounds + 2)
    assert [d for d in decisions(server) if d["service_version"] == "4.1.0"] == []


def test_a_turn_stamped_a_day_ahead_does_not_silence_a_session(server: RunningServer) -> None:
    support = Service(server, "support-desk", "4.2.0")
    billing = Service(server, "billing-desk", "1.2.0", agent="billing-agent")
    ahead = Service(server, "support-desk", "4.2.0")
    conversation = "user-4711-future"
    billing.turn(conversation, [LOOKUP], ago=-DAY)
    ahead.turn(conversation, [LOOKUP], ago=-DAY)  # its own service, its clock a day fast
    one(server, conversation, "support-desk", turns=1)
    written = support.turn(conversation, [LOOKUP, WRITE])

    d = firing(server, "QUARANTINE", service_version="4.2.0")
    assert d["evidence_trace_ids"] == [written]
    found = one(server, conversation, "support-desk", turns=2)
    assert found["trace_ids"][-1] == written  # the order they arrived in
    assert found["verdict"] == "fail"


def test_a_late_approval_stamped_before_a_failed_write_does_not_pass_it(
    server: RunningServer,
) -> None:
    support = Service(server, "support-desk", "4.3.0")
    conversation = "user-4711-late"
    written = support.turn(conversation, [LOOKUP, WRITE], ago=5)
    firing(server, "QUARANTINE", service_version="4.3.0")
    one(server, conversation, "support-desk", verdict="fail")
    # arrives now, stamped a minute before the write it would have covered
    approved = support.turn(conversation, [APPROVE], ago=65)

    found = one(server, conversation, "support-desk", turns=2)
    assert found["trace_ids"] == [written, approved]
    verdicts = [r["verdict"] for r in found["results"] if r["rule_id"] == "fresh-approval"]
    assert verdicts == ["fail"] and found["verdict"] == "fail"
    rounds = scraped(server, "sextant_decision_evaluations_total") or 0
    wait_for(lambda: (scraped(server, "sextant_decision_evaluations_total") or 0) >= rounds + 2)
    firing(server, "QUARANTINE", service_version="4.3.0")


def test_a_session_across_services_is_a_configured_choice(tmp_path: Path) -> None:
    """`sessions.across_services`: one session per conversation id, whatever service sent a
    turn; each turn is still judged only by the packs that select its service."""
    running = serve(
        tmp_path,
        {"sessions": PACK},
        assembler=FAST,
        decisions=DECIDE_FAST,
        sessions={"tick_seconds": 0.1, "across_services": True},
    )
    try:
        support = Service(running, "support-desk", "4.4.0")
        billing = Service(running, "billing-desk", "1.4.0", agent="billing-agent")
        conversation = "user-4711-shared"
        first = billing.turn(conversation, [CHARGE_FAILS], ago=30)
        second = billing.turn(conversation, [CHARGE_FAILS], ago=20)
        written = support.turn(conversation, [LOOKUP, WRITE], ago=10)
        billing.turn(conversation, [LOOKUP], ago=-DAY)
        found = one(running, conversation, "*", turns=4)
        assert found["trace_ids"][:3] == [first, second, written]
        # the billing turns are evidence for no support-desk rule: the write is uncovered, and
        # billing's failures are not the support desk's
        d = firing(running, "QUARANTINE", service_version="4.4.0")
        assert d["evidence_trace_ids"] == [written]
        rules = {r["rule_id"]: r["verdict"] for r in found["results"]}
        assert rules == {"fresh-approval": "fail", "failing-tools": "pass"}
    finally:
        running.stop()


BILLING_PACK = """
name: billing-sessions
version: "1"
owner: billing-oncall
selector: {service: billing-desk}
rules:
  - id: failing-tools
    type: repeated_failures
    min_turns: 2
    reason: repeated_tool_failure
    on_fail: DOWNGRADE
"""
CAPTURE = TESTDATA / "otlp-multi" / "python_sdk-genai_semconv-two_services.otlp.json"


def test_the_captured_services_sharing_a_conversation_are_judged_apart(tmp_path: Path) -> None:
    """Recorded from two SDK providers: billing approves and fails twice, support writes with
    no approval of its own, then a billing host a day fast sends the latest-stamped turn."""
    running = serve(
        tmp_path,
        {"support": PACK, "billing": BILLING_PACK},
        assembler=FAST,
        decisions=DECIDE_FAST,
        sessions={"tick_seconds": 0.1},
    )
    try:
        send(running, CAPTURE, "http/json")
        d = firing(running, "QUARANTINE", service_name="support-desk")
        down = firing(running, "DOWNGRADE", service_name="billing-desk")
        both = sessions_of(running, "user-4711-9f2c", 2)
        assert (both["support-desk"]["turns"], both["billing-desk"]["turns"]) == (1, 3)
        (written,) = both["support-desk"]["trace_ids"]
        assert d["reasons"] == ["stale_approval"] and d["evidence_trace_ids"] == [written]
        assert len(down["evidence_trace_ids"]) == 2
        assert written not in down["evidence_trace_ids"]
        support = one(running, "user-4711-9f2c", "support-desk")
        rules = {r["rule_id"]: r["verdict"] for r in support["results"]}
        assert rules == {"fresh-approval": "fail", "failing-tools": "pass"}
        assert [x for x in decisions(running) if x["decision"] == "DOWNGRADE"] == [down]
    finally:
        running.stop()
