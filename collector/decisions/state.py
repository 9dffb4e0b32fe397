"""The state of one decision, and its transitions: pending (waiting `for`) → firing → resolved.

Pure: each evaluation hands in the time and what it found (or nothing), and gets back the events
to record. Like Prometheus alerts, pending never notifies, a firing decision stays firing until its
condition has been clear for `resolve_after`, and a resolved one is never reopened: the same
condition later starts a new decision with a new id.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field, replace
from datetime import datetime
from enum import StrEnum

from collector.targets import ANY, Target
from evaluators.base import DECISION_STRENGTH, Decision, strongest

MAX_EVIDENCE = 20


class State(StrEnum):
    """Where a decision is in its life; stored as these strings in `decisions.state`."""

    PENDING = "pending"  # the condition holds, waiting for `for`
    FIRING = "firing"
    RESOLVED = "resolved"


ACTIVE = (State.PENDING, State.FIRING)


ACTIVE_FILTER = "active"  # the `state=active` filter of the API: pending or firing


class Event(StrEnum):
    """What happened to a decision in one transition; stored in `decisions.event`."""

    PENDING = "pending"  # it started, waiting for `for`
    FIRING = "firing"  # it fired (or, after a restart, fires again)
    UPDATED = "updated"  # new reasons or rules while it was active
    # New evidence (newer failing runs) while it was active: recorded, so the stored decision
    # and the API show the newest; alerts carry it from their next re-send, not a page each.
    EVIDENCE = "evidence"
    RESOLVED = "resolved"  # its condition cleared
    ACK = "ack"  # a person acknowledged it
    RESOLVE = "resolve"  # a person resolved it by hand
    # A dataset was replayed to recertify the fix before a person's resolve: recorded whether
    # it was clean or not, the state unchanged (collector/datasets/recertify.py).
    RECERTIFY = "recertify"


# Coverage that is lost collector-wide (backlog, alert delivery) is about every target at once:
# it is decided for this one, and no target shows PASS while it fires.
EVERY_TARGET = Target(ANY, ANY, ANY)


def service_scope(service: str) -> Target:
    """Every target of one service: where its rejected spans cost coverage."""
    return Target(service, ANY, ANY)


# Sextant's own health: coverage lost where no sender can be told (a request that cannot be
# decoded, spans of a resource without service.name). It holds for no target but itself.
COLLECTOR_TARGET = Target("", "", "")


@dataclass(frozen=True)
class Key:
    """One decision per target, decision and policy; deduplicated on this."""

    target: Target
    decision: Decision
    policy: str


@dataclass(frozen=True)
class Observation:
    """What one evaluation saw for a key: the condition holds, with this evidence."""

    reasons: tuple[str, ...]
    rules: tuple[str, ...] = ()
    packs: tuple[str, ...] = ()
    owner: str = ""
    evidence: tuple[str, ...] = ()
    summary: str = ""
    for_seconds: float = 0.0
    resolve_after: float = 0.0
    latest: datetime | None = None  # the newest result behind it


@dataclass(frozen=True)
class DecisionState:
    key: Key
    id: str
    state: State
    active_at: datetime
    last_seen_at: datetime
    finding: Observation
    fired_at: datetime | None = None
    resolved_at: datetime | None = None
    acked_by: str | None = None
    ack_note: str | None = None
    seq: int = 0
    events: tuple[Event, ...] = field(default=())

    @property
    def strength(self) -> int:
        return DECISION_STRENGTH[self.key.decision]


def new_id() -> str:
    return "d-" + uuid.uuid4().hex[:16]


def merge(old: Observation, new: Observation) -> Observation:
    """Reasons and rules accumulate over a decision's life; evidence keeps the newest first."""
    evidence = list(dict.fromkeys(new.evidence + old.evidence))[:MAX_EVIDENCE]
    return replace(
        new,
        reasons=tuple(sorted(set(old.reasons) | set(new.reasons))),
        rules=tuple(sorted(set(old.rules) | set(new.rules))),
        packs=tuple(sorted(set(old.packs) | set(new.packs))),
        evidence=tuple(evidence),
    )


def step(
    state: DecisionState | None, key: Key, found: Observation | None, now: datetime
) -> DecisionState | None:
    """The state after one evaluation; `events` lists what happened in it (to record)."""
    if state is None or state.state == State.RESOLVED:
        if found is None:
            return None
        fresh = DecisionState(
            key,
            new_id(),
            State.PENDING,
            now,
            now,
            replace(found, evidence=found.evidence[:MAX_EVIDENCE]),
        )
        if found.for_seconds <= 0:
            return replace(fresh, state=State.FIRING, fired_at=now, events=(Event.FIRING,))
        return replace(fresh, events=(Event.PENDING,))
    if found is not None:
        merged = merge(state.finding, found)
        grew = merged.reasons != state.finding.reasons or merged.rules != state.finding.rules
        current = replace(state, finding=merged, last_seen_at=now, events=())
        if state.state == State.PENDING and (now - state.active_at).total_seconds() >= (
            found.for_seconds
        ):
            return replace(current, state=State.FIRING, fired_at=now, events=(Event.FIRING,))
        if grew:
            return replace(current, events=(Event.UPDATED,))
        if set(merged.evidence) != set(state.finding.evidence):
            return replace(current, events=(Event.EVIDENCE,))
        return current
    if state.state == State.PENDING:
        # The condition cleared before `for` elapsed: it never fired, so it just ends.
        return resolved(state, now, Event.RESOLVED)
    if (now - state.last_seen_at).total_seconds() >= state.finding.resolve_after:
        return resolved(state, now, Event.RESOLVED)
    return replace(state, events=())


def resolved(state: DecisionState, now: datetime, event: Event) -> DecisionState:
    """The decision ended now: its condition cleared, or a person resolved it."""
    return replace(state, state=State.RESOLVED, resolved_at=now, events=(event,))


def strongest_first(states: list[DecisionState]) -> list[DecisionState]:
    """By the precedence of `evaluators.base.DECISION_PRECEDENCE`, then oldest first."""
    return sorted(states, key=lambda s: (s.strength, s.active_at))


def effective(states: list[DecisionState]) -> Decision:
    """The strongest firing decision (PASS when none fires)."""
    return strongest([s.key.decision for s in states if s.state == State.FIRING])


def summary_of(state: DecisionState) -> str:
    """One line for people: the decision, the target and why."""
    f = state.finding
    what = f.summary or ", ".join(f.reasons) or "condition holds"
    return f"{state.key.decision.value} {state.key.target.label()}: {what}"
