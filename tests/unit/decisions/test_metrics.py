"""Decision gauges at scrape time: state, why and whose, strength, and the shared target cap."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

from prometheus_client import CollectorRegistry

from collector.clock import FakeClock
from collector.decisions.engine import Snapshot
from collector.decisions.metrics import DecisionCollector
from collector.decisions.state import EVERY_TARGET, DecisionState, Key, Observation, State
from collector.targets import OVERFLOW, Target, TargetCap
from evaluators.base import Decision

CLOCK = FakeClock()
NOW = CLOCK.now()
A, B, C = (Target("svc", "agent", v) for v in ("1", "2", "3"))


def firing(target: Target, decision: Decision, *reasons: str, owner: str = "") -> DecisionState:
    return DecisionState(
        key=Key(target, decision, "policy"),
        id=f"d-{target.version}-{decision.value}",
        state=State.FIRING,
        active_at=NOW,
        last_seen_at=NOW,
        finding=Observation(reasons=reasons, owner=owner),
        fired_at=NOW,
    )


def scrape(snapshot: Snapshot, cap: TargetCap) -> CollectorRegistry:
    registry = CollectorRegistry()
    registry.register(DecisionCollector(lambda: snapshot, cap))
    return registry


def samples(registry: CollectorRegistry, name: str) -> list[dict[str, str]]:
    return [s.labels for f in registry.collect() for s in f.samples if s.name == name]


def test_a_firing_decision_shows_its_reasons_and_owner_and_strength_has_no_decision_label():
    snap = Snapshot(
        [
            firing(A, Decision.QUARANTINE, "wrong_authorization_context", owner="oncall"),
            firing(A, Decision.QUARANTINE, "approval_boundary_violation", owner="oncall"),
            firing(A, Decision.FAIL, "tool_outside_allow_list", owner="oncall"),
        ],
        {A: NOW},
    )
    registry = scrape(snap, TargetCap(10, 3600, CLOCK))
    target = {"service": "svc", "agent": "agent", "version": "1"}
    info = {
        (s["decision"], s["reasons"], s["owner"])
        for s in samples(registry, "sextant_decision_info")
    }
    assert info == {
        ("QUARANTINE", "approval_boundary_violation,wrong_authorization_context", "oncall"),
        ("FAIL", "tool_outside_allow_list", "oncall"),
    }
    assert registry.get_sample_value("sextant_target_decision_strength", target) == 4.0
    assert registry.get_sample_value("sextant_decision_state", {**target, "decision": "PASS"}) == 0


def test_a_collector_wide_decision_fires_for_every_target_with_its_reasons():
    snap = Snapshot([firing(EVERY_TARGET, Decision.REVIEW, "coverage_lost_backlog")], {A: NOW})
    registry = scrape(snap, TargetCap(10, 3600, CLOCK))
    reviews = {
        s["version"]: s["reasons"]
        for s in samples(registry, "sextant_decision_info")
        if s["decision"] == "REVIEW"
    }
    assert reviews == {"1": "coverage_lost_backlog", "*": "coverage_lost_backlog"}


def test_targets_the_cap_turns_away_share_overflow_in_every_gauge():
    cap = TargetCap(1, 3600, CLOCK)
    cap.shown(("svc", "agent", "1"))  # counted a run first: it holds the one place
    old = NOW - timedelta(minutes=5)
    snap = Snapshot(
        [firing(B, Decision.FAIL, "x"), firing(C, Decision.FAIL, "y")], {B: NOW, A: old}
    )
    registry = scrape(snap, cap)
    versions = {s["version"] for s in samples(registry, "sextant_decision_state")}
    assert versions == {"1", OVERFLOW[2]}
    info = samples(registry, "sextant_decision_info")
    assert {(s["version"], s["reasons"]) for s in info} == {("_overflow", "x,y")}


def test_the_dashboard_row_names_the_decision_that_fired_first_while_it_fires():
    first = firing(A, Decision.QUARANTINE, "approval_boundary_violation")
    later = replace(
        firing(A, Decision.QUARANTINE, "wrong_authorization_context"),
        id="d-later",
        fired_at=NOW + timedelta(minutes=2),
    )
    registry = scrape(Snapshot([later, first], {A: NOW}), TargetCap(10, 3600, CLOCK))
    (info,) = samples(registry, "sextant_decision_info")
    assert info["decision_id"] == first.id
    registry = scrape(Snapshot([later], {A: NOW}), TargetCap(10, 3600, CLOCK))  # first resolved
    (info,) = samples(registry, "sextant_decision_info")
    assert info["decision_id"] == "d-later"
