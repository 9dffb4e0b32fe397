"""A review nobody answers is coverage lost: a real collector raises the target's decision when a
REVIEW waits past its pack's review.sla, real Prometheus fires SextantReviewBacklog from the
queue gauges and real Alertmanager delivers it; a reviewer's label, written through the
collector's store writer, clears both."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests

from tests.support.admin import decisions, firing, scraped, trajectory
from tests.support.agents import refund_run
from tests.support.paths import DEPLOY
from tests.support.prometheus import alertmanager_to, prometheus
from tests.support.review_backlog import human_label, store
from tests.support.server import DECIDE_FAST, FAST, RunningServer, serve
from tests.support.wait import wait_for
from tests.support.webhook import Receiver

# The refund runs' root carries no enduser.id: the rule cannot compare and asks for a review.
PACK = """
name: refunds
version: "1.0.0"
owner: refunds-reviewers
selector: {service: support-desk}
review: {sla: 2s}
rules:
  - id: same-customer
    type: consistency
    step: {kind: tool, name: issue_refund}
    attribute: enduser.id
    reason: customer_mismatch
"""
RULES = [
    DEPLOY / "prometheus/sextant-recording.rules.yml",
    DEPLOY / "prometheus/sextant-alerts.rules.yml",
]
QUEUE = {"owner": "refunds-reviewers", "pack": "refunds"}


@pytest.fixture
def hook() -> Iterator[Receiver]:
    r = Receiver([])
    yield r
    r.close()


def backlog_alerts(hook: Receiver, status: str) -> list[dict[str, Any]]:
    return [
        a
        for n in hook.delivered()
        for a in n["alerts"]
        if a["labels"]["alertname"] == "SextantReviewBacklog" and a["status"] == status
    ]


def target_reasons(server: RunningServer) -> list[str]:
    """Why the refund agent's target has its decision (GET /api/v1/targets)."""
    reply = requests.get(f"{server.admin_url}/api/v1/targets", timeout=5).json()
    [target] = [t for t in reply["targets"] if t["service"] == "support-desk"]
    return target["reasons"]


def test_a_review_past_its_sla_decides_and_pages_until_a_reviewer_labels_it(
    tmp_path: Path, hook: Receiver
) -> None:
    server = serve(
        tmp_path,
        {"refunds": PACK},
        assembler=FAST,
        rules={"reload_seconds": 0.1},
        decisions={**DECIDE_FAST, "review_backlog_seconds": 0.1},
    )
    admin = server.admin_url.removeprefix("http://")
    try:
        with (
            alertmanager_to(hook.url, tmp_path) as am,
            prometheus(tmp_path, admin, RULES, alertmanager=am) as prom,
        ):
            run = refund_run(server, approve=True)
            trajectory(server, run)
            [asked] = server.query_dicts(
                "SELECT * FROM results WHERE trace_id = ? AND pack = 'refunds'", [run]
            )
            assert asked["verdict"] == "review"

            d = firing(server, "REVIEW", policy="refunds/review_backlog")
            assert d["reasons"] == ["coverage_lost_review_backlog"]
            assert d["owner"] == "refunds-reviewers"
            assert d["evidence_trace_ids"] == [run]
            assert (d["service_name"], d["agent_name"]) == ("support-desk", "support-agent")
            assert scraped(server, "sextant_review_queue_items", **QUEUE) == 1.0
            assert scraped(server, "sextant_review_sla_seconds", **QUEUE) == 2.0
            assert "coverage_lost_review_backlog" in target_reasons(server)

            paged = wait_for(lambda: backlog_alerts(hook, "firing"), timeout=30, interval=0.5)
            labels = paged[0]["labels"]
            assert (labels["owner"], labels["pack"], labels["severity"]) == (
                "refunds-reviewers",
                "refunds",
                "warning",
            )
            assert "past its review.sla" in paged[0]["annotations"]["summary"]

            label = human_label(asked, "pass", "ana", server.pipeline.clock.now(), "same person")
            store(server.pipeline.writer, "results", label)

            def resolved() -> list[dict[str, Any]]:
                return [
                    x
                    for x in decisions(server, state="resolved")
                    if x["decision_id"] == d["decision_id"]
                ]

            wait_for(resolved, timeout=30, interval=0.2)
            assert "coverage_lost_review_backlog" not in target_reasons(server)
            assert scraped(server, "sextant_review_queue_items", **QUEUE) == 0.0
            wait_for(lambda: backlog_alerts(hook, "resolved"), timeout=30, interval=0.5)
            assert not prom.query('ALERTS{alertname="SextantReviewBacklog"}')
    finally:
        server.stop()
