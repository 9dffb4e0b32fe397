"""Agent runs from the real OTel SDK are evaluated under the shipped packs as they close."""

from __future__ import annotations

import time
from pathlib import Path

import requests
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter

from tests.support.admin import trajectory
from tests.support.agents import AgentScript, provider_for, support_run, trace_id_of
from tests.support.server import RunningServer
from tests.support.wait import eventually, wait_for


def results_of(t: dict) -> dict[str, dict]:
    return {f"{r['pack']}/{r['rule_id']}": r for r in t["results"]}


def test_the_correct_support_run_passes(evaluating_server: RunningServer) -> None:
    t = trajectory(evaluating_server, support_run(evaluating_server))
    assert t["verdict"] == "pass"
    results = results_of(t)
    assert results["support-agent/approval-before-account-change"]["verdict"] == "pass"
    assert results["support-agent/acts-as-the-requesting-user"]["verdict"] == "pass"
    assert results["default/no-secrets-in-tools"]["verdict"] == "pass"
    assert {r["pack_version"] for r in t["results"]} == {"1.0.0"}
    assert all(len(r["pack_sha256"]) == 64 for r in t["results"])


def test_a_write_without_approval_fails_with_evidence(evaluating_server: RunningServer) -> None:
    t = trajectory(evaluating_server, support_run(evaluating_server, approve=False))
    update = next(s for s in t["steps_detail"] if s["name"] == "update_account")
    result = results_of(t)["support-agent/approval-before-account-change"]
    assert (result["verdict"], result["reason"]) == ("fail", "approval_boundary_violation")
    assert result["evidence_span_ids"] == [update["span_id"]]
    assert result["requested_decision"] == "QUARANTINE"
    assert t["verdict"] == "fail"
    assert "approval_boundary_violation" in t["verdict_reasons"]
    labels = {
        "pack": "support-agent",
        "rule": "approval-before-account-change",
        "verdict": "fail",
        "reason": "approval_boundary_violation",
    }
    # counted just after the commit that made the trajectory visible
    wait_for(lambda: evaluating_server.metric("sextant_evaluator_results_total", labels) == 1)


def test_acting_as_another_user_fails_the_authorization_check(
    evaluating_server: RunningServer,
) -> None:
    t = trajectory(evaluating_server, support_run(evaluating_server, user="admin"))
    result = results_of(t)["support-agent/acts-as-the-requesting-user"]
    assert (result["verdict"], result["reason"]) == ("fail", "wrong_authorization_context")


def test_research_run_without_literature_search_fails(evaluating_server: RunningServer) -> None:
    provider = provider_for(
        OTLPSpanExporter(endpoint=evaluating_server.grpc_endpoint, insecure=True)
    )
    script = AgentScript(provider.get_tracer("research"))
    with script.agent("paper-agent", "Summarise agent evaluation", "From memory.") as root:
        script.chat()
    provider.shutdown()
    t = trajectory(evaluating_server, trace_id_of(root))
    result = results_of(t)["research-agent/literature-search-required"]
    assert (result["verdict"], result["reason"]) == ("fail", "literature_search_missing")
    assert t["verdict"] == "fail"


def test_a_tool_loop_fails_the_loop_budget(evaluating_server: RunningServer) -> None:
    provider = provider_for(
        OTLPSpanExporter(endpoint=evaluating_server.grpc_endpoint, insecure=True)
    )
    script = AgentScript(provider.get_tracer("loop"))
    with script.agent("travel-agent", "Find a flight", "Still looking.") as root:
        for _ in range(6):
            script.chat([("search_flights", {"origin": "LIS"})])
            script.tool("search_flights", {"origin": "LIS"}, "[]")
    provider.shutdown()
    t = trajectory(evaluating_server, trace_id_of(root))
    result = results_of(t)["default/no-tool-loops"]
    assert (result["verdict"], result["reason"]) == ("fail", "tool_loop")
    assert len(result["evidence_span_ids"]) == 6
    assert t["verdict"] == "review"  # the default pack asks for a review, not a failure


def test_an_error_then_a_retry_passes_recovery(evaluating_server: RunningServer) -> None:
    provider = provider_for(
        OTLPSpanExporter(endpoint=evaluating_server.grpc_endpoint, insecure=True)
    )
    script = AgentScript(provider.get_tracer("travel"))
    with script.agent("travel-agent", "Hold a seat", "Held.") as root:
        script.chat([("hold_seat", {"seat": "14C"})])
        script.tool("hold_seat", {"seat": "14C"}, error="SeatInventoryUnavailable")
        script.tool("hold_seat", {"seat": "14C"}, "HLD-1")
        script.chat()
    provider.shutdown()
    t = trajectory(evaluating_server, trace_id_of(root))
    assert results_of(t)["default/errors-are-recovered"]["verdict"] == "pass"
    assert t["verdict"] == "pass"


def test_hot_reload_takes_edits_and_refuses_broken_ones(evaluating_server: RunningServer) -> None:
    pack = evaluating_server.rules_dir / "support-agent.yaml"
    status = f"{evaluating_server.admin_url}/api/v1/rules"

    def support_version() -> str | None:
        packs = requests.get(status, timeout=5).json()["packs"]
        return next((p["version"] for p in packs if p["pack"] == "support-agent"), None)

    text = pack.read_text()
    pack.write_text(text.replace('version: "1.0.0"', 'version: "1.1.0"'))
    wait_for(lambda: support_version() == "1.1.0")
    t = trajectory(evaluating_server, support_run(evaluating_server))
    versions = {r["pack_version"] for r in t["results"] if r["pack"] == "support-agent"}
    assert versions == {"1.1.0"}

    time.sleep(0.05)  # a different mtime
    pack.write_text(
        text.replace('version: "1.0.0"', 'version: "1.2.0"').replace(
            "type: precedes", "type: telepathy", 1
        )
    )
    refused = wait_for(
        lambda: next(
            (p for p in requests.get(status, timeout=5).json()["packs"] if p["refused"]), None
        )
    )
    assert refused["version"] == "1.1.0"  # the last good version keeps evaluating
    assert "unknown rule type" in refused["refused"][0]
    t = trajectory(evaluating_server, support_run(evaluating_server, approve=False))
    result = results_of(t)["support-agent/approval-before-account-change"]
    assert (result["verdict"], result["pack_version"]) == ("fail", "1.1.0")

    recorded = evaluating_server.query(
        "SELECT version FROM rule_packs WHERE name = 'support-agent' ORDER BY loaded_at, version"
    )
    assert [r[0] for r in recorded] == ["1.0.0", "1.1.0"]

    def health() -> tuple[str, int, int]:
        rules = requests.get(status, timeout=5).json()["rules"]
        found = next(r for r in rules if r["rule"] == "approval-before-account-change")
        return found["status"], found["evaluated"], found["failed"]

    wait_for(lambda: health() == ("active", 2, 1))  # counted just after the run's commit
    assert evaluating_server.metric("sextant_rules_reloads_total", {"result": "refused"}) == 1


def test_rules_test_and_status_commands(evaluating_server: RunningServer, tmp_path: Path) -> None:
    import json
    import subprocess
    import sys

    good = trajectory(evaluating_server, support_run(evaluating_server))
    bad = trajectory(evaluating_server, support_run(evaluating_server, approve=False))
    cases = tmp_path / "cases.jsonl"
    rule = "approval-before-account-change"
    cases.write_text(
        json.dumps({**bad, "expect": {"verdict": "fail", "rules": {rule: "fail"}}})
        + "\n"
        + json.dumps({**good, "expect": {"verdict": "pass", "rules": {rule: "pass"}}})
        + "\n"
    )
    pack = str(evaluating_server.rules_dir / "support-agent.yaml")

    def cli(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "collector.cli", *args],
            capture_output=True,
            text=True,
            timeout=60,
        )

    passed = cli("rules", "test", pack, "--cases", str(cases))
    assert passed.returncode == 0, passed.stdout + passed.stderr
    assert "2 of 2 cases as expected" in passed.stdout
    wrong = tmp_path / "wrong.jsonl"
    wrong.write_text(json.dumps({**bad, "expect": {"verdict": "pass"}}) + "\n")
    failed = cli("rules", "test", pack, "--cases", str(wrong))
    assert failed.returncode == 1
    assert "verdict fail, expected pass" in failed.stdout
    assert "approval_boundary_violation" in failed.stdout

    status = cli("rules", "status", "--url", evaluating_server.admin_url)
    assert status.returncode == 0, status.stderr
    assert "support-agent 1.0.0" in status.stdout
    line = next(x for x in status.stdout.splitlines() if rule in x)
    assert line.split()[2:6] == ["active", "2", "1", "1"]


def test_results_and_verdict_counters_carry_trace_exemplars(
    evaluating_server: RunningServer,
) -> None:
    bad = support_run(evaluating_server, approve=False)
    trajectory(evaluating_server, bad)

    def scraped() -> list[str]:
        """/metrics once it counts the run (just after the commit that made it visible)."""
        reply = requests.get(
            f"{evaluating_server.admin_url}/metrics",
            headers={"Accept": "application/openmetrics-text; version=1.0.0"},
            timeout=5,
        )
        assert reply.headers["Content-Type"].startswith("application/openmetrics-text")
        lines = reply.text.splitlines()
        assert any(line.startswith('sextant_trajectories_total{verdict="fail"}') for line in lines)
        return lines

    lines = eventually(scraped)
    violation = next(
        line
        for line in lines
        if line.startswith("sextant_evaluator_results_total{")
        and 'reason="approval_boundary_violation"' in line
    )
    assert f'# {{trace_id="{bad}"}}' in violation
    verdict = next(
        line for line in lines if line.startswith('sextant_trajectories_total{verdict="fail"}')
    )
    assert f'trace_id="{bad}"' in verdict
