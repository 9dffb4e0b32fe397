"""The decision state machine stepped by hand with a controllable clock."""

from __future__ import annotations

from datetime import datetime, timedelta

from collector.decisions.state import (
    MAX_EVIDENCE,
    Key,
    Observation,
    effective,
    step,
    strongest_first,
)
from collector.targets import Target
from evaluators.base import Decision

T0 = datetime(2026, 11, 29, 12, 0, 0)
TARGET = Target("support-api", "support-agent", "2.4.0")


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def finding(
    *reasons: str, for_seconds: float = 0, resolve_after: float = 60, evidence=()
) -> Observation:
    return Observation(
        reasons=reasons,
        rules=tuple(f"pack/{r}" for r in reasons),
        owner="oncall",
        evidence=tuple(evidence),
        for_seconds=for_seconds,
        resolve_after=resolve_after,
    )


KEY = Key(TARGET, Decision.QUARANTINE, "support-agent/quarantine")


def test_without_for_it_fires_at_once_and_resolves_after_being_clear_for_resolve_after():
    s = step(None, KEY, finding("approval_boundary_violation"), at(0))
    assert (s.state, s.events, s.fired_at) == ("firing", ("firing",), at(0))
    first_id = s.id
    s = step(s, KEY, None, at(30))  # clear, but not yet for resolve_after (60 s)
    assert (s.state, s.events) == ("firing", ())
    s = step(s, KEY, None, at(59))
    assert s.state == "firing"
    s = step(s, KEY, None, at(60))
    assert (s.state, s.events, s.resolved_at) == ("resolved", ("resolved",), at(60))
    assert s.id == first_id


def test_for_keeps_it_pending_until_the_condition_has_held_that_long():
    f = finding("loop", for_seconds=120)
    s = step(None, KEY, f, at(0))
    assert (s.state, s.events) == ("pending", ("pending",))
    s = step(s, KEY, f, at(60))
    assert (s.state, s.events) == ("pending", ())
    s = step(s, KEY, f, at(120))
    assert (s.state, s.events, s.fired_at, s.active_at) == ("firing", ("firing",), at(120), at(0))


def test_pending_that_clears_before_for_never_fires():
    s = step(None, KEY, finding("loop", for_seconds=120), at(0))
    s = step(s, KEY, None, at(30))
    assert (s.state, s.fired_at) == ("resolved", None)


def test_condition_seen_again_keeps_it_firing_and_restarts_the_resolve_clock():
    s = step(None, KEY, finding("a"), at(0))
    s = step(s, KEY, None, at(50))
    s = step(s, KEY, finding("a"), at(55))
    s = step(s, KEY, None, at(100))  # 45 s after last seen
    assert s.state == "firing"
    s = step(s, KEY, None, at(115))
    assert s.state == "resolved"


def test_a_resolved_decision_is_never_reopened_the_same_condition_starts_a_new_one():
    s = step(None, KEY, finding("a", resolve_after=0), at(0))
    s = step(s, KEY, None, at(1))
    assert s.state == "resolved"
    again = step(s, KEY, finding("a"), at(2))
    assert again.state == "firing" and again.id != s.id
    assert step(s, KEY, None, at(3)) is None  # nothing found, nothing to track


def test_reasons_accumulate_and_growth_is_an_update_event_evidence_stays_bounded():
    s = step(None, KEY, finding("a", evidence=[f"t{i}" for i in range(5)]), at(0))
    s = step(s, KEY, finding("a", evidence=["t5"]), at(1))
    assert s.events == ("evidence",)  # same reasons, a newer failing run: recorded
    assert s.finding.evidence == ("t5", "t0", "t1", "t2", "t3", "t4")
    s = step(s, KEY, finding("a", evidence=["t5", "t0"]), at(1.5))
    assert s.events == ()  # nothing new: nothing to record
    s = step(s, KEY, finding("b", evidence=[f"n{i}" for i in range(30)]), at(2))
    assert s.events == ("updated",)
    assert s.finding.reasons == ("a", "b")
    assert len(s.finding.evidence) == MAX_EVIDENCE
    assert s.finding.evidence[0] == "n0"  # newest evidence first


def test_precedence_strongest_first_and_effective_decision():
    def firing(decision: Decision, t: float):
        return step(None, Key(TARGET, decision, decision.value), finding("r"), at(t))

    states = [firing(d, i) for i, d in enumerate(Decision) if d != Decision.PASS]
    ordered = [s.key.decision for s in strongest_first(states)]
    assert ordered == [
        Decision.DISABLE,
        Decision.ROLLBACK,
        Decision.QUARANTINE,
        Decision.DOWNGRADE,
        Decision.FAIL,
        Decision.REVIEW,
    ]
    assert effective(states) == Decision.DISABLE
    review_only = [firing(Decision.REVIEW, 0), firing(Decision.FAIL, 1)]
    assert effective(review_only) == Decision.FAIL
    pending = step(None, KEY, finding("x", for_seconds=60), at(0))
    assert effective([pending]) == Decision.PASS  # pending does not count yet
    assert effective([]) == Decision.PASS
