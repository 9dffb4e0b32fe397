"""Real Prometheus scrapes Sextant; real Alertmanager receives, routes and resolves its alerts.

The binaries come from the Debian packages `prometheus` and `prometheus-alertmanager`, which
scripts/test installs; a missing binary fails these tests instead of skipping them.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests

from tests.support.admin import firing, trajectory
from tests.support.agents import support_run
from tests.support.prometheus import alertmanager as running_alertmanager
from tests.support.prometheus import prometheus
from tests.support.server import serve_deciding
from tests.support.wait import wait_for
from tests.support.webhook import Receiver


@pytest.fixture
def hook() -> Iterator[Receiver]:
    r = Receiver([])
    yield r
    r.close()


@pytest.fixture
def alertmanager(tmp_path: Path, hook: Receiver) -> Iterator[str]:
    """Every alert to the test's webhook receiver, at once."""
    config = tmp_path / "alertmanager.yml"
    config.write_text(
        json.dumps(
            {
                "route": {
                    "receiver": "hook",
                    "group_by": ["..."],
                    "group_wait": "0s",
                    "group_interval": "1s",
                    "repeat_interval": "1h",
                },
                "receivers": [
                    {"name": "hook", "webhook_configs": [{"url": hook.url, "send_resolved": True}]}
                ],
            }
        )
    )
    with running_alertmanager(config, tmp_path) as url:
        yield url


def test_prometheus_sees_a_decision_fire(tmp_path: Path) -> None:
    server = serve_deciding(tmp_path)
    try:
        with prometheus(tmp_path, server.admin_url.removeprefix("http://")) as prom:
            trajectory(server, support_run(server, approve=False))
            firing(server, "QUARANTINE")
            query = 'sextant_decision_state{decision="QUARANTINE",service="support-desk"} == 1'
            result = wait_for(lambda: prom.query(query), timeout=30, interval=0.5)
            labels = result[0]["metric"]
            assert (labels["agent"], labels["version"], labels["job"]) == (
                "support-agent",
                "2.3.1",
                "sextant",
            )
            verdicts = prom.query('sextant_evaluator_results_total{verdict="fail"}')
            assert any(r["metric"]["reason"] == "approval_boundary_violation" for r in verdicts)
    finally:
        server.stop()


def test_alertmanager_gets_the_quarantine_with_labels_and_evidence_then_its_resolution(
    tmp_path: Path, alertmanager: str, hook: Receiver
) -> None:
    server = serve_deciding(
        tmp_path, alerts={"alertmanager": [{"url": alertmanager, "resend_seconds": 1}]}
    )
    try:
        bad = support_run(server, approve=False)
        trajectory(server, bad)
        d = firing(server, "QUARANTINE")

        def active() -> list:
            return requests.get(f"{alertmanager}/api/v2/alerts", timeout=5).json()

        alert = wait_for(active, timeout=20)[0]
        assert alert["labels"] == {
            "alertname": "SextantQuarantine",
            "decision": "QUARANTINE",
            "service": "support-desk",
            "agent": "support-agent",
            "version": "2.3.1",
            "severity": "critical",
            "reason": "approval_boundary_violation",
        }
        assert alert["annotations"]["evidence_trace_ids"] == bad
        assert alert["annotations"]["owner"] == "support-platform-oncall"
        assert alert["annotations"]["decision_id"] == d["decision_id"]

        def notified(status: str) -> list:
            return [
                a
                for n in hook.delivered()
                for a in n["alerts"]
                if a["status"] == status and a["labels"]["alertname"] == "SextantQuarantine"
            ]

        sent = wait_for(lambda: notified("firing"), timeout=20)[0]
        assert sent["annotations"]["trajectory_url"].endswith(f"/trajectories/{bad}")
        assert "/api/" not in sent["annotations"]["trajectory_url"]
        assert sent["generatorURL"].endswith(f"/decisions/{d['decision_id']}")
        assert "/api/" not in sent["generatorURL"]
        url = f"{server.admin_url}/api/v1/decisions/{d['decision_id']}"
        requests.post(f"{url}/ack", json={"by": "ana", "note": "on it"}, timeout=5)
        requests.post(f"{url}/resolve", json={"by": "ana", "note": "fixed"}, timeout=5)
        resolved = wait_for(lambda: notified("resolved"), timeout=20)[0]
        assert resolved["labels"]["decision"] == "QUARANTINE"
        assert resolved["annotations"]["acknowledged_by"] == "ana"
        wait_for(lambda: not [a for a in active() if a["status"]["state"] == "active"])
    finally:
        server.stop()
