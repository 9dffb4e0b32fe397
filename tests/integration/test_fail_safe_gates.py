"""The Argo gate and the decision alerts fail safe when Sextant stops, and one bad span reaches
`increase()` and fires the health alert: real Prometheus scrapes a real collector with the
shipped query and rule files."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import grpc
import yaml

from tests.support.admin import firing, trajectory
from tests.support.agents import support_run
from tests.support.otlp import TRACE_EXPORT, simple_spans, trace_request
from tests.support.prometheus import Prometheus, prometheus
from tests.support.server import serve_deciding
from tests.support.wait import wait_for

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
HEALTH_RULES = DEPLOY / "prometheus/sextant-alerts.rules.yml"
CANARY = {"service": "support-desk", "agent": "support-agent", "version": "2.3.1"}


def gate() -> dict[str, Any]:
    return yaml.safe_load((DEPLOY / "argo/analysis-template.yaml").read_text())["spec"]["metrics"][
        0
    ]


def gate_query(metric: dict[str, Any], **args: str) -> str:
    query = metric["provider"]["prometheus"]["query"]
    for name, value in args.items():
        query = query.replace(f"{{{{args.{name}}}}}", value)
    return query


def assess(metric: dict[str, Any], result: list[float]) -> str:
    """Argo's verdict on one measurement: Failed or Successful when its condition holds,
    Inconclusive when neither does. The conditions use only `len`, `result`, `&&` and `||`."""

    def holds(condition: str) -> bool:
        python = condition.replace("&&", " and ").replace("||", " or ")
        return bool(eval(python, {"len": len}, {"result": result}))

    if holds(metric["failureCondition"]):
        return "Failed"
    if holds(metric["successCondition"]):
        return "Successful"
    return "Inconclusive"


def target_down(prom: Prometheus) -> bool:
    return prom.values('up{job="sextant"}') == [0.0]


def test_the_argo_gate_passes_a_seen_canary_and_stops_passing_when_sextant_is_down(
    tmp_path: Path,
) -> None:
    metric = gate()
    assert assess(metric, [1.0]) == "Failed"
    server = serve_deciding(tmp_path)
    admin = server.admin_url.removeprefix("http://")
    with prometheus(tmp_path, admin) as prom:
        try:
            trajectory(server, support_run(server, approve=True))
            query = gate_query(metric, **CANARY)
            passing = wait_for(lambda: prom.values(query), timeout=30, interval=0.5)
            assert passing == [0.0]
            assert assess(metric, passing) == "Successful"
            unseen = prom.values(gate_query(metric, **{**CANARY, "version": "9.9.9"}))
            assert assess(metric, unseen) == "Inconclusive"
        finally:
            server.stop()
        wait_for(lambda: target_down(prom), timeout=30, interval=0.5)
        down = prom.values(query)
        assert down == []
        assert assess(metric, down) == "Inconclusive"


def test_a_firing_decision_alert_stays_firing_while_sextant_is_down(tmp_path: Path) -> None:
    server = serve_deciding(tmp_path)
    admin = server.admin_url.removeprefix("http://")
    rules = [DEPLOY / "prometheus/sextant-decisions.rules.yml"]
    with prometheus(tmp_path, admin, rules) as prom:

        def firing_alerts() -> list[dict[str, Any]]:
            return [
                a
                for a in prom.alerts()
                if a["labels"]["alertname"] == "SextantDecisionFiring"
                and a["labels"]["decision"] == "QUARANTINE"
                and a["state"] == "firing"
            ]

        try:
            trajectory(server, support_run(server, approve=False))
            firing(server, "QUARANTINE")
            alert = wait_for(firing_alerts, timeout=30, interval=0.5)[0]
            assert alert["labels"]["severity"] == "critical"
        finally:
            server.stop()
        wait_for(lambda: target_down(prom), timeout=30, interval=0.5)
        # Several rule evaluations (1 s apart) with the target down: the alert never resolves.
        until = time.monotonic() + 5
        while time.monotonic() < until:
            assert firing_alerts(), "the decision alert resolved during the outage"
            time.sleep(0.5)


def test_a_single_rejected_span_is_seen_by_increase_and_fires_the_health_alert(
    tmp_path: Path,
) -> None:
    server = serve_deciding(tmp_path)
    admin = server.admin_url.removeprefix("http://")
    rejected = 'sextant_receiver_items_rejected_total{protocol="grpc", reason="invalid_trace_id"}'
    rules = [DEPLOY / "prometheus/sextant-recording.rules.yml", HEALTH_RULES]
    try:
        with prometheus(tmp_path, admin, rules) as prom:
            # two scrapes at 0 before the span, as any long-running Sextant has
            def scraped_twice() -> bool:
                found = prom.query(f"{rejected}[1m]")
                return bool(found) and len(found[0]["values"]) >= 2

            wait_for(scraped_twice, timeout=30, interval=0.5)
            request = trace_request(simple_spans(1))
            request.resource_spans[0].scope_spans[0].spans[0].trace_id = b"short"
            with grpc.insecure_channel(server.grpc_endpoint) as channel:
                channel.unary_unary(TRACE_EXPORT)(request.SerializeToString())
            seen = wait_for(
                lambda: prom.values(f"increase({rejected}[1m]) > 0"), timeout=30, interval=0.5
            )
            assert seen[0] > 0

            def alert() -> list[dict[str, Any]]:
                return [
                    a
                    for a in prom.alerts()
                    if a["labels"]["alertname"] == "SextantRejectingSpans"
                    and a["state"] == "firing"
                ]

            fired = wait_for(alert, timeout=30, interval=0.5)[0]
            assert fired["labels"]["reason"] == "invalid_trace_id"
    finally:
        server.stop()
