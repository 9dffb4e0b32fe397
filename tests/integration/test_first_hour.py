"""What a newcomer meets in a first hour: an idle collector does not review every target for
no data unless asked to; a run's `review` next to its rules' `fail` says why on its page; the
console is on at the default (loopback) admin address and the start-up log says where."""

from __future__ import annotations

import re
import time
from pathlib import Path

import requests
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from playwright.sync_api import Browser
from prometheus_client import CollectorRegistry

from collector.admin.throttle import FailedLogins, LoginMetrics
from collector.auth import BearerAuth
from collector.config import load_config
from collector.console.access import ConsoleAccess
from tests.support.admin import decisions, firing, trajectory
from tests.support.agents import AgentScript, provider_for, support_run, trace_id_of
from tests.support.browser import new_page
from tests.support.process import EPHEMERAL, Serve
from tests.support.server import DECIDE_FAST, RunningServer, serve_deciding, serve_shipped_packs
from tests.support.wait import wait_for

SILENCE = 1.0  # decisions.no_data_after_seconds in these tests


def silent_long_enough(server: RunningServer, last_closed: float) -> bool:
    """Two decision rounds began after the target had been silent SILENCE seconds: a `no_data`
    review, were it configured, would be there by now."""
    marks: list[float] = []

    def rounds_after_silence() -> bool:
        if time.time() < last_closed + SILENCE:
            return False
        count = server.metric("sextant_decision_evaluations_total")
        if not marks:
            marks.append(count)
        return count >= marks[0] + 2

    return bool(wait_for(rounds_after_silence, timeout=20))


def test_an_idle_collector_does_not_review_its_targets_for_no_data(tmp_path: Path) -> None:
    server = serve_deciding(tmp_path, decisions={**DECIDE_FAST, "no_data_after_seconds": SILENCE})
    try:
        trajectory(server, support_run(server))
        assert silent_long_enough(server, time.time())
        found = [d for d in decisions(server) if "no_data" in d["reasons"]]
        assert found == []
    finally:
        server.stop()


def test_a_configured_no_data_expectation_still_fires(tmp_path: Path) -> None:
    asked = {**DECIDE_FAST, "no_data": "review", "no_data_after_seconds": SILENCE}
    server = serve_deciding(tmp_path, decisions=asked)
    try:
        trajectory(server, support_run(server))
        d = firing(server, "REVIEW", policy="coverage/no_data")
        assert d["reasons"] == ["no_data"] and d["service_name"] == "support-desk"
    finally:
        server.stop()


def looping_run(server: RunningServer) -> str:
    """A travel-desk run that calls the same tool with the same arguments five times in a row:
    the default pack's no-tool-loops fails it and asks (on_fail) for a review."""
    provider = provider_for(
        OTLPSpanExporter(endpoint=server.grpc_endpoint, insecure=True), service="travel-desk"
    )
    script = AgentScript(provider.get_tracer("agent_loop"))
    with script.agent("travel-agent", "Book LIS-OSL", "Still searching.") as root:
        for _ in range(5):
            script.chat([("search_flights", {"origin": "LIS", "destination": "OSL"})])
            script.tool("search_flights", {"origin": "LIS", "destination": "OSL"}, "[]")
        script.chat()
    provider.shutdown()
    return trace_id_of(root)


def test_a_review_beside_failed_rules_says_why_on_the_page(
    chromium: Browser, tmp_path: Path
) -> None:
    server = serve_shipped_packs(tmp_path)
    try:
        trace_id = looping_run(server)
        doc = trajectory(server, trace_id)
        assert doc["verdict"] == "review"
        with new_page(chromium) as page:
            page.goto(f"{server.admin_url}/trajectories/{trace_id}")
            assert page.locator("h1 .verdict").inner_text() == "review"
            badges = page.locator("#steps .badge").all_inner_texts()
            assert "fail" in badges and "review" not in badges
            why = page.locator("#verdict-why").inner_text()
            rule = "default/no-tool-loops"
            assert why == f"fail → review: pack default's on_fail is REVIEW for {rule}"
        # a run whose rules pass has no such line
        passed = support_run(server)
        assert trajectory(server, passed)["verdict"] == "pass"
        page_text = requests.get(f"{server.admin_url}/trajectories/{passed}", timeout=5).text
        assert 'id="verdict-why"' not in page_text
    finally:
        server.stop()


def test_the_console_is_on_at_the_default_admin_address() -> None:
    admin = load_config(None, environ={}).admin
    assert admin.host_port == ("127.0.0.1", 9464)
    throttle = FailedLogins(10, 6.0, lambda: 0.0, LoginMetrics(CollectorRegistry()))
    assert ConsoleAccess(admin, BearerAuth([]), lambda: 0.0, throttle).served


def test_the_start_up_log_says_where_the_console_is(tmp_path: Path) -> None:
    serve = Serve([*EPHEMERAL, "--data-dir", str(tmp_path / "d")], tmp_path)
    try:
        port = serve.ports["admin"]
        said = wait_for(lambda: re.search(r"console on (\S+)", serve.output), timeout=20)
        assert said[1] == f"http://127.0.0.1:{port}/"
        home = requests.get(said[1], timeout=5)
        assert home.status_code == 200 and "<title>" in home.text
    finally:
        assert serve.stop() == 0
