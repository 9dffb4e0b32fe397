"""Per-target run metrics: what one round of runs adds, and the target cap on their labels."""

from __future__ import annotations

from dataclasses import replace

from prometheus_client import CollectorRegistry

from collector.clock import FakeClock
from collector.evaluation.metrics import TargetMetrics
from collector.evaluation.round import Tally
from collector.evaluation.runs import Runs
from collector.targets import TargetCap
from tests.support.trajectories import llm, run, step, tool

TARGET = {"service": "support", "agent": "support-agent", "version": "1.0"}
OVERFLOW = {"service": "_overflow", "agent": "_overflow", "version": "_overflow"}


def metrics(max_targets: int = 10) -> tuple[CollectorRegistry, TargetMetrics, FakeClock]:
    registry, clock = CollectorRegistry(), FakeClock()
    return registry, TargetMetrics(registry, TargetCap(max_targets, 3600, clock)), clock


def test_a_round_counts_runs_duration_tokens_cost_and_tool_errors() -> None:
    registry, target_metrics, _ = metrics()
    runs = Runs()
    t = run(llm(1, cost_usd=0.25), tool(2, "lookup", status="error"), llm(3))
    runs.count(t, "fail")
    runs.count(replace(t, trace_id="cd" * 16, steps=t.steps[:3]), "pass")
    target_metrics.record({("support", "support-agent", "1.0"): runs})
    value = registry.get_sample_value
    assert value("sextant_target_runs_total", {**TARGET, "verdict": "fail"}) == 1
    assert value("sextant_target_runs_total", {**TARGET, "verdict": "pass"}) == 1
    assert value("sextant_target_runs_total", {**TARGET, "verdict": "review"}) == 0  # exists
    assert value("sextant_target_run_duration_seconds_count", TARGET) == 2
    assert value("sextant_target_run_duration_seconds_sum", TARGET) == 118  # 59 s each
    assert value("sextant_target_run_duration_seconds_bucket", {**TARGET, "le": "30.0"}) == 0
    assert value("sextant_target_run_duration_seconds_bucket", {**TARGET, "le": "60.0"}) == 2
    assert value("sextant_target_tokens_total", {**TARGET, "type": "input"}) == 300
    assert value("sextant_target_tokens_total", {**TARGET, "type": "output"}) == 30
    assert value("sextant_target_cost_usd_total", TARGET) == 0.5
    assert value("sextant_target_tool_errors_total", TARGET) == 2


def test_targets_beyond_the_cap_share_the_overflow_labels() -> None:
    registry, target_metrics, _ = metrics(max_targets=2)
    for version in ("1", "2", "3", "4"):
        runs = Runs()
        runs.count(replace(run(llm(1)), service_version=version), "pass")
        target_metrics.record({("support", "support-agent", version): runs})
    value = registry.get_sample_value
    for version in ("1", "2"):
        labels = {**TARGET, "version": version, "verdict": "pass"}
        assert value("sextant_target_runs_total", labels) == 1
    assert value("sextant_target_runs_total", {**TARGET, "version": "3", "verdict": "pass"}) is None
    assert value("sextant_target_runs_total", {**OVERFLOW, "verdict": "pass"}) == 2
    assert value("sextant_target_tokens_total", {**OVERFLOW, "type": "input"}) == 200
    assert value("sextant_target_run_duration_seconds_count", OVERFLOW) == 2
    versions = {
        s.labels["version"]
        for family in registry.collect()
        for s in family.samples
        if s.name.startswith("sextant_target_")
    }
    assert versions == {"1", "2", "_overflow"}


def test_a_target_that_gives_its_place_up_loses_its_series() -> None:
    registry, target_metrics, clock = metrics(max_targets=1)
    runs = Runs()
    runs.count(run(llm(1)), "pass")
    target_metrics.record({("support", "support-agent", "1.0"): runs})
    clock.advance(3601)
    target_metrics.record({("support", "support-agent", "2.0"): runs})
    value = registry.get_sample_value
    assert value("sextant_target_runs_total", {**TARGET, "verdict": "pass"}) is None
    assert value("sextant_target_run_duration_seconds_count", TARGET) is None
    assert value("sextant_target_runs_total", {**TARGET, "version": "2.0", "verdict": "pass"}) == 1


def test_runs_carry_an_example_trace_id_as_exemplar() -> None:
    registry, target_metrics, _ = metrics()
    runs = Runs()
    runs.count(run(tool(1, "lookup", status="error")), "fail")
    target_metrics.record({("support", "support-agent", "1.0"): runs})
    exemplars = {
        s.name: s.exemplar.labels["trace_id"]
        for family in registry.collect()
        for s in family.samples
        if s.exemplar is not None
    }
    assert exemplars["sextant_target_runs_total"] == "ab" * 16
    assert exemplars["sextant_target_tool_errors_total"] == "ab" * 16
    assert exemplars["sextant_target_run_duration_seconds_bucket"] == "ab" * 16


def test_a_trace_that_is_no_agent_run_is_no_run_of_its_target_but_lists_its_tools() -> None:
    """An MCP `tools/list` trace (or a build-time `create_agent`) adds no run, verdict,
    duration or token; the tools it lists still reach the MCP inventory."""
    listing = {"method": "tools/list", "server": "crm", "tools": ["lookup"]}
    chatter = replace(run(step(1, "other", "tools/list.mcp", mcp=listing)), agent_run=False)
    tally = Tally()
    tally.count(chatter, [])
    tally.count(run(llm(1)), [])
    assert [runs.verdicts for runs in tally.targets.values()] == [{"none": 1}]
    assert tally.verdicts == {"none": 1}
    assert tally.mcp.listings == {("support", "crm"): (2_000_000_000, {"lookup"})}
