"""Signed webhooks to a local receiver: signature, retries, re-notify, and failure → REVIEW."""

from __future__ import annotations

import hashlib
import hmac
from pathlib import Path

import pytest
import requests

from tests.support.admin import firing, scraped, trajectory
from tests.support.agents import support_run
from tests.support.cli import sextant
from tests.support.drift import send_runs
from tests.support.server import DECIDE_FAST, FAST, RunningServer, serve, serve_deciding
from tests.support.wait import wait_for
from tests.support.webhook import Receiver

SECRET = "s3cret-signing-key"


def webhook_server(tmp_path: Path, receiver: Receiver, **extra) -> RunningServer:
    alerts = {
        "webhooks": [{"url": receiver.url, "secret": SECRET, "renotify_seconds": 1.0}],
        "backoff_seconds": 0.05,
        "max_attempts": 3,
        **extra,
    }
    return serve_deciding(tmp_path, alerts=alerts)


@pytest.fixture
def receiver():
    r = Receiver([500, 503])
    yield r
    r.close()


def test_a_firing_decision_arrives_signed_after_retries_and_is_renotified(tmp_path, receiver):
    server = webhook_server(tmp_path, receiver)
    try:
        bad = support_run(server, approve=False)
        trajectory(server, bad)
        d = firing(server, "QUARANTINE")
        first = wait_for(receiver.delivered)[0]
        assert first["status"] == "firing"
        assert first["decision_id"] == d["decision_id"]
        assert first["labels"]["decision"] == "QUARANTINE"
        assert first["labels"]["reason"] == "approval_boundary_violation"
        assert first["annotations"]["owner"] == "support-platform-oncall"
        assert first["annotations"]["evidence_trace_ids"] == bad
        # links to the console's pages, on this collector's admin port
        assert first["annotations"]["trajectory_url"] == f"{server.admin_url}/trajectories/{bad}"
        page = f"{server.admin_url}/decisions/{d['decision_id']}"
        assert first["annotations"]["decision_url"] == page
        assert first["generatorURL"] == page
        # two failures then a success: three attempts, each one signed over timestamp.body
        attempts = receiver.received[:3]
        assert [a["status"] for a in attempts] == [500, 503, 200]
        for a in attempts:
            timestamp = a["headers"]["X-Sextant-Timestamp"]
            expected = hmac.new(
                SECRET.encode(), timestamp.encode() + b"." + a["body"], hashlib.sha256
            ).hexdigest()
            assert a["headers"]["X-Sextant-Signature"] == f"sha256={expected}"
        labels = {"channel": "webhook"}
        assert server.metric("sextant_alerts_failed_attempts_total", labels) == 2
        # firing alerts are sent again every renotify interval
        wait_for(lambda: len(receiver.delivered()) >= 2, timeout=10)
        assert receiver.delivered()[1]["dedup_key"] == first["dedup_key"]
        # the first delivery's row (the re-sends after it are rows of their own)
        sql = "SELECT attempt, ok FROM alerts WHERE channel = 'webhook' ORDER BY sent_at LIMIT 1"
        assert server.query(sql) == [(3, True)]
        # resolving by hand sends `resolved` with an end time
        url = f"{server.admin_url}/api/v1/decisions/{d['decision_id']}/resolve"
        requests.post(url, json={"by": "ana", "note": "fixed"}, timeout=5).raise_for_status()
        resolved = wait_for(lambda: [n for n in receiver.delivered() if n["status"] == "resolved"])
        assert resolved[0]["endsAt"] is not None
    finally:
        server.stop()


def test_a_dead_channel_is_counted_and_becomes_a_review_decision(tmp_path):
    dead = Receiver([500] * 1000)
    server = webhook_server(tmp_path, dead)
    try:
        trajectory(server, support_run(server, approve=False))
        d = firing(server, "REVIEW", policy="coverage/alert_delivery")
        assert d["reasons"] == ["alert_delivery_failing"]
        assert server.metric("sextant_alerts_failed_attempts_total", {"channel": "webhook"}) >= 3
        labels = {"channel": "webhook", "why": "undeliverable"}
        assert server.metric("sextant_alerts_dropped_total", labels) >= 1
        # ingest is not held up by the failing channel
        trajectory(server, support_run(server))
    finally:
        server.stop()
        dead.close()


def test_the_channel_failing_gauge_is_1_while_a_dead_webhook_fails_and_0_once_it_answers(
    tmp_path,
):
    """Dead from the start: the gauge shows it from the first failed attempt, however rarely
    attempts come, and a delivery that succeeds clears it."""
    dead = Receiver([503] * 1000)
    server = webhook_server(tmp_path, dead)

    def failing() -> float | None:
        return scraped(server, "sextant_alerts_channel_failing", channel="webhook")

    try:
        assert failing() == 0.0  # exposed before any delivery
        trajectory(server, support_run(server, approve=False))
        firing(server, "QUARANTINE")
        wait_for(lambda: failing() == 1.0, timeout=20)
        assert dead.delivered() == []
        with dead.lock:
            dead.statuses = []  # the receiver comes back: the next re-send goes through
        wait_for(lambda: failing() == 0.0, timeout=20)
        assert dead.delivered()
    finally:
        server.stop()
        dead.close()


def test_alerts_test_reports_each_channel(tmp_path, receiver):
    unreachable = "http://127.0.0.1:9/nothing-listens-here"
    server = serve_deciding(
        tmp_path,
        alerts={
            "webhooks": [
                {"url": receiver.url, "name": "ok-hook", "secret": SECRET},
                {"url": unreachable, "name": "down-hook"},
            ],
            "timeout_seconds": 2,
        },
    )
    receiver.statuses = []
    try:
        reply = requests.post(f"{server.admin_url}/api/v1/alerts/test", json={}, timeout=10).json()
        by_name = {c["channel"]: c for c in reply["channels"]}
        assert by_name["ok-hook"]["ok"] is True
        assert by_name["down-hook"]["ok"] is False
        assert "cannot reach" in by_name["down-hook"]["error"]
        assert receiver.delivered()[0]["labels"]["alertname"] == "SextantTest"
    finally:
        server.stop()


def test_a_firing_alert_is_picked_up_again_after_a_restart(tmp_path, receiver):
    receiver.statuses = []
    server = webhook_server(tmp_path, receiver, webhooks=[{"url": receiver.url, "secret": SECRET}])
    trajectory(server, support_run(server, approve=False))
    d = firing(server, "QUARANTINE")
    wait_for(receiver.delivered)
    server.stop()
    before = len(receiver.delivered())
    server = webhook_server(tmp_path, receiver, webhooks=[{"url": receiver.url, "secret": SECRET}])
    try:
        again = wait_for(lambda: receiver.delivered()[before:])
        assert (again[0]["status"], again[0]["decision_id"]) == ("firing", d["decision_id"])
        url = f"{server.admin_url}/api/v1/decisions/{d['decision_id']}/resolve"
        requests.post(url, json={"by": "ana"}, timeout=5).raise_for_status()
        resolved = wait_for(lambda: [n for n in receiver.delivered() if n["status"] == "resolved"])
        assert resolved[0]["decision_id"] == d["decision_id"]
    finally:
        server.stop()


def test_a_waiting_alert_is_queued_once_however_often_it_is_re_sent():
    from prometheus_client import CollectorRegistry

    from collector.alerts.channels import Notification
    from collector.alerts.metrics import AlertMetrics
    from collector.alerts.notifier import Notifier
    from collector.config.decisions import AlertsConfig

    config = AlertsConfig(webhooks=[{"url": "http://127.0.0.1:9/x"}], queue_size=3)
    notifier = Notifier(config, writer=None, metrics=AlertMetrics(CollectorRegistry()),
                        base_url=lambda: "http://sextant")  # fmt: skip
    box = notifier.outboxes[0]

    def alert(key: str, status: str = "firing", summary: str = "") -> Notification:
        return Notification(key, "d-1", status, {}, {"summary": summary}, "t", None, "u")

    for i in range(10):
        notifier.offer(box, alert("a", summary=str(i)))
    notifier.offer(box, alert("a", "resolved"))
    notifier.offer(box, alert("b"))
    assert [(n.dedup_key, n.status) for n in box.queue] == [
        ("a", "firing"),
        ("a", "resolved"),
        ("b", "firing"),
    ]
    assert box.queue[0].annotations["summary"] == "9"  # the newest version waits


CANARY_PACK = """
name: travel-canary
version: "1.0.0"
owner: travel-oncall
selector: {service: travel-desk}
rules:
  - id: canary-tool-mix
    type: drift
    interval: 0.5s
    compare:
      baseline: {service.version: "1.4.*"}
      candidate: {service.version: "1.5.*"}
    current: {last: 1h}
    metrics: [tool_choice]
    min_samples: 15
    reason: canary_behaviour_changed
    on_fail: ROLLBACK
"""


def test_a_review_that_only_waits_for_samples_is_info_shown_and_recorded(
    tmp_path, receiver, capsys
):
    """Even with REVIEW raised to warning, a new canary short of min_samples is an info alert:
    a state of the target, in the decisions list, not a page."""
    receiver.statuses = []
    server = serve(
        tmp_path,
        {"canary": CANARY_PACK},
        assembler=FAST,
        drift={"tick_seconds": 0.1},
        decisions=DECIDE_FAST,
        alerts={"webhooks": [{"url": receiver.url}], "severity": {"REVIEW": "warning"}},
    )
    try:
        tools = [["search_flights", "confirm_booking"]] * 5
        send_runs(server.grpc_endpoint, "travel-desk", "1.4.0", tools)
        send_runs(server.grpc_endpoint, "travel-desk", "1.5.0", tools)
        d = firing(server, "REVIEW", service_version="1.5.0")
        assert d["reasons"] == ["insufficient_samples"]
        sent = wait_for(
            lambda: [n for n in receiver.delivered() if n["labels"]["decision"] == "REVIEW"]
        )[0]
        assert (sent["labels"]["severity"], sent["labels"]["reason"]) == (
            "info",
            "insufficient_samples",
        )
        code, out = sextant(capsys, "decisions", "--url", server.admin_url, "--decision", "REVIEW")
        assert code == 0
        assert "travel-desk/travel-agent@1.5.0" in out and "insufficient_samples" in out
        history = server.query(
            "SELECT event FROM decisions WHERE decision_id = ? ORDER BY seq", [d["decision_id"]]
        )
        assert history == [("firing",)]
    finally:
        server.stop()


def test_the_severity_of_a_decision_comes_from_config_and_waiting_for_samples_is_its_own():
    from datetime import datetime

    from prometheus_client import CollectorRegistry

    from collector.alerts.metrics import AlertMetrics
    from collector.alerts.notifier import Notifier
    from collector.config.decisions import AlertsConfig
    from collector.decisions.state import DecisionState, Key, Observation, State
    from collector.targets import Target
    from evaluators.base import Decision

    def state(decision: Decision, *reasons: str) -> DecisionState:
        key = Key(Target("s", "a", "1"), decision, "p")
        now = datetime(2026, 1, 1)
        return DecisionState(key, "d-1", State.FIRING, now, now, Observation(reasons=reasons))

    def severity(config: AlertsConfig, decision: Decision, *reasons: str) -> str:
        notifier = Notifier(config, None, AlertMetrics(CollectorRegistry()), lambda: "http://s")
        return notifier.severity(state(decision, *reasons))

    default = AlertsConfig()
    assert severity(default, Decision.QUARANTINE, "approval_boundary_violation") == "critical"
    assert severity(default, Decision.REVIEW, "insufficient_samples") == "info"
    raised = AlertsConfig(severity={"REVIEW": "warning"})
    assert severity(raised, Decision.REVIEW, "insufficient_samples") == "info"
    assert severity(raised, Decision.REVIEW, "coverage_lost_incomplete_traces") == "warning"
    assert severity(raised, Decision.REVIEW, "insufficient_samples", "no_data") == "warning"
    paged = AlertsConfig(insufficient_samples_severity="warning")
    assert severity(paged, Decision.REVIEW, "insufficient_samples") == "warning"


def test_new_evidence_of_a_firing_decision_goes_out_with_its_next_renotification(tmp_path):
    receiver = Receiver([])
    server = webhook_server(tmp_path, receiver)
    try:
        first = support_run(server, approve=False)
        trajectory(server, first)
        d = firing(server, "QUARANTINE")
        wait_for(receiver.delivered)
        later = support_run(server, approve=False)
        trajectory(server, later)

        def carried() -> dict | None:
            for n in receiver.delivered():
                if n["annotations"]["evidence_trace_ids"] == f"{later},{first}":
                    return n
            return None

        sent = wait_for(carried, timeout=10)
        assert (sent["decision_id"], sent["status"]) == (d["decision_id"], "firing")
        assert sent["annotations"]["trajectory_url"].endswith(f"/trajectories/{later}")
    finally:
        server.stop()
        receiver.close()
