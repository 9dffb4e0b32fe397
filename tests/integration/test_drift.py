"""Canary drift end to end: version B skips a required tool and calls a new one; the canary
rule fails with B's runs as evidence, while a candidate that behaves like A passes."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from tests.support.drift import send_alternating, send_runs, serve_pack
from tests.support.server import RunningServer
from tests.support.wait import wait_for

PACK = """
name: travel-canary
version: "1.0.0"
owner: travel-oncall
selector: {service: "travel-desk*", agent: travel-agent}
rules:
  - id: canary-tool-mix
    type: drift
    interval: 0.5s
    compare:
      baseline: {service.version: "1.4.*"}
      candidate: {service.version: "1.5.*"}
    current: {last: 1h}
    metrics: [tool_choice, steps, error_rate]
    alpha: 0.01
    min_samples: 15
    reason: canary_behaviour_changed
    severity: high
    on_fail: ROLLBACK
"""
A = ["search_flights", "hold_seat", "confirm_booking"]
B = ["search_flights", "reserve_seat_v2", "confirm_booking"]  # hold_seat gone, a new tool
RUNS = 20


@pytest.fixture
def canary_server(tmp_path: Path):
    running = serve_pack(tmp_path, "canary", PACK)
    yield running
    running.stop()


def window_results(server: RunningServer, after: datetime) -> list[dict]:
    """The results of the first evaluation that started after `after`."""
    return server.query_dicts(
        "SELECT * FROM results WHERE scope = 'window' AND evaluated_at = (SELECT min(evaluated_at)"
        " FROM results WHERE scope = 'window' AND evaluated_at > ?) ORDER BY service_name, metric",
        [after],
    )


def test_canary_fails_on_the_changed_version_with_its_runs_as_evidence(
    canary_server: RunningServer,
) -> None:
    endpoint = canary_server.grpc_endpoint
    # each canary's runs arrive beside production's: they are compared over the same minutes
    _, b_sent = send_alternating(endpoint, "travel-desk", ("1.4.0", "1.5.0"), (A, B), RUNS)
    b_runs = set(b_sent)
    # a twin service whose candidate behaves exactly like its baseline: no drift
    send_alternating(endpoint, "travel-desk-twin", ("1.4.2", "1.5.1"), (A, A), RUNS)
    # too few runs to say anything: a review, never a silent pass
    send_alternating(endpoint, "travel-desk-small", ("1.4.0", "1.5.0"), (A, B), 5)
    wait_for(
        lambda: canary_server.query("SELECT count(*) FROM trajectories")[0][0] == 4 * RUNS + 10,
        timeout=60,
    )
    stored = datetime.now(UTC).replace(tzinfo=None)
    found = wait_for(lambda: window_results(canary_server, stored), timeout=30)
    assert len(found) == 9  # 3 targets x 3 metrics
    by_key = {(r["service_name"], r["metric"]): r for r in found}

    changed = by_key[("travel-desk", "tool_choice")]
    assert (changed["verdict"], changed["reason"]) == ("fail", "canary_behaviour_changed")
    assert changed["requested_decision"] == "ROLLBACK"
    assert (changed["trace_id"], changed["revision"]) == (None, 0)
    assert changed["service_version"] == "1.5.0" and changed["agent_name"] == "travel-agent"
    assert changed["baseline"] == "service.version 1.4.* over the same window"
    # production's first run came before the canary's: the comparison starts at the canary's
    assert (changed["baseline_n"], changed["current_n"]) == (RUNS - 1, RUNS)
    assert changed["effect_size"] > 0.3 and changed["p_value"] < 0.01
    assert changed["evidence_trace_ids"] and set(changed["evidence_trace_ids"]) <= b_runs
    assert "reserve_seat_v2" in changed["message"] and "hold_seat" in changed["message"]
    assert changed["window_end"] > changed["window_start"]
    # the same number of steps and no errors: those metrics did not drift
    assert by_key[("travel-desk", "steps")]["verdict"] == "pass"
    assert by_key[("travel-desk", "error_rate")]["verdict"] == "pass"

    for metric in ("tool_choice", "steps", "error_rate"):
        twin = by_key[("travel-desk-twin", metric)]
        assert twin["verdict"] == "pass", twin
        assert twin["service_version"] == "1.5.1"
    assert by_key[("travel-desk-twin", "tool_choice")]["effect_size"] == pytest.approx(0.0)

    small = by_key[("travel-desk-small", "tool_choice")]
    assert (small["verdict"], small["reason"]) == ("review", "insufficient_samples")
    assert small["requested_decision"] == "REVIEW"

    labels = {
        "pack": "travel-canary",
        "rule": "canary-tool-mix",
        "service": "travel-desk",
        "agent": "travel-agent",
        "version": "1.5.0",
        "metric": "tool_choice",
    }
    assert canary_server.metric("sextant_drift_effect_size", labels) > 0.3
    assert canary_server.metric("sextant_drift_p_value", labels) < 0.01
    counts = {"pack": "travel-canary", "rule": "canary-tool-mix"}
    assert (
        canary_server.metric("sextant_drift_evaluations_total", {**counts, "verdict": "fail"}) >= 1
    )
    assert (
        canary_server.metric("sextant_drift_evaluations_total", {**counts, "verdict": "review"})
        >= 1
    )


def test_baseline_version_alone_gives_no_window_results(canary_server: RunningServer) -> None:
    send_runs(canary_server.grpc_endpoint, "travel-desk", "1.4.0", [A] * RUNS)
    wait_for(
        lambda: canary_server.query("SELECT count(*) FROM trajectories")[0][0] == RUNS, timeout=60
    )
    ran = canary_server.metric("sextant_drift_evaluation_duration_seconds_count")
    wait_for(
        lambda: canary_server.metric("sextant_drift_evaluation_duration_seconds_count") >= ran + 2,
        timeout=30,
    )
    assert canary_server.query("SELECT count(*) FROM results WHERE scope = 'window'")[0][0] == 0


SNAPSHOT_PACK = """
name: travel-snapshot
version: "1.0.0"
owner: travel-oncall
selector: {service: travel-desk, version: "1.5.*"}
rules:
  - id: against-release-baseline
    type: drift
    interval: 0.5s
    baseline: {snapshot: release-1.4}
    metrics: [tool_choice]
    min_samples: 15
    reason: drift_from_release
    on_fail: REVIEW
"""


def test_a_saved_baseline_is_frozen_and_compared_with(tmp_path: Path) -> None:
    import requests

    server = serve_pack(tmp_path, "snapshot", SNAPSHOT_PACK)
    try:
        send_runs(server.grpc_endpoint, "travel-desk", "1.4.0", [A] * RUNS)
        wait_for(lambda: server.query("SELECT count(*) FROM trajectories")[0][0] == RUNS)
        saved = requests.post(
            f"{server.admin_url}/api/v1/baselines",
            json={"name": "release-1.4", "target": "travel-desk/travel-agent/1.4.*"},
            timeout=10,
        )
        assert saved.status_code == 201, saved.text
        assert saved.json()["runs"] == RUNS
        again = requests.post(
            f"{server.admin_url}/api/v1/baselines", json={"name": "release-1.4"}, timeout=10
        )
        assert again.status_code == 400 and "already exists" in again.json()["error"]
        listed = requests.get(f"{server.admin_url}/api/v1/baselines", timeout=10).json()
        assert [b["name"] for b in listed["baselines"]] == ["release-1.4"]
        # runs of 1.4.0 after the snapshot do not join it
        send_runs(server.grpc_endpoint, "travel-desk", "1.4.0", [B] * 5)
        b_runs = set(send_runs(server.grpc_endpoint, "travel-desk", "1.5.0", [B] * RUNS))
        wait_for(lambda: server.query("SELECT count(*) FROM trajectories")[0][0] == 2 * RUNS + 5)
        stored = datetime.now(UTC).replace(tzinfo=None)
        [result] = wait_for(lambda: window_results(server, stored), timeout=30)
        assert (result["verdict"], result["reason"]) == ("fail", "drift_from_release")
        assert result["baseline"] == "snapshot release-1.4"
        assert (result["baseline_n"], result["current_n"]) == (RUNS, RUNS)
        assert set(result["evidence_trace_ids"]) <= b_runs
    finally:
        server.stop()


def test_a_restarted_collector_resumes_a_canary_where_it_was(tmp_path: Path) -> None:
    """The canary's anytime-valid tests are a function of its stored runs: after a restart the
    first look judges the same life with the same evidence, not a fresh start."""
    server = serve_pack(tmp_path, "canary", PACK)
    try:
        send_alternating(server.grpc_endpoint, "travel-desk", ("1.4.0", "1.5.0"), (A, B), RUNS)
        wait_for(lambda: server.query("SELECT count(*) FROM trajectories")[0][0] == 2 * RUNS, 60)
        stored = datetime.now(UTC).replace(tzinfo=None)
        before = {r["metric"]: r for r in wait_for(lambda: window_results(server, stored), 30)}
    finally:
        server.stop()
    restarted = datetime.now(UTC).replace(tzinfo=None)
    server = serve_pack(tmp_path, "canary", PACK)
    try:
        after = {r["metric"]: r for r in wait_for(lambda: window_results(server, restarted), 30)}
    finally:
        server.stop()
    tool_mix = before["tool_choice"]
    assert tool_mix["verdict"] == "fail" and "anytime one-sided p=" in tool_mix["message"]
    for metric, row in before.items():
        again = after[metric]
        assert (again["verdict"], again["p_value"]) == (row["verdict"], row["p_value"]), metric
        assert again["window_start"] == row["window_start"]  # the canary's first run
