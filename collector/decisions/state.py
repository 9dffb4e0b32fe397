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

from evaluators.base import DECISION_STRENGTH, Decision

MAX_EVIDENCE = 20


@dataclass(frozen=True)
class Target:
    service: str
    agent: str
    version: str

    def label(self) -> str:
        return f"{self.service}/{self.agent}@{self.version}"


@dataclass(frozen=True)
class Key:
    """One decision per target, decision and policy; deduplicated on this."""

    target: Target
    decision: Decision
    policy: str


@dataclass(frozen=True)
class Finding:
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
    state: str  # pending | firing | resolved
    active_at: datetime
    last_seen_at: datetime
    finding: Finding
    fired_at: datetime | None = None
    resolved_at: datetime | None = None
    acked_by: str | None = None
    ack_note: str | None = None
    seq: int = 0
    events: tuple[str, ...] = field(default=())

    @property
    def strength(self) -> int:
        return DECISION_STRENGTH[self.key.decision]


def new_id() -> str:
    return "d-" + uuid.uuid4().hex[:16]


def merge(old: Finding, new: Finding) -> Finding:
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
    state: DecisionState | None, key: Key, found: Finding | None, now: datetime
) -> DecisionState | None:
    """The state after one evaluation; `events` lists what happened in it (to record)."""
    if state is None or state.state == "resolved":
        if found is None:
            return None
        fresh = DecisionState(
            key,
            new_id(),
            "pending",
            now,
            now,
            replace(found, evidence=found.evidence[:MAX_EVIDENCE]),
        )
        if found.for_seconds <= 0:
            return replace(fresh, state="firing", fired_at=now, events=("firing",))
        return replace(fresh, events=("pending",))
    if found is not None:
        merged = merge(state.finding, found)
        grew = merged.reasons != state.finding.reasons or merged.rules != state.finding.rules
        current = replace(state, finding=merged, last_seen_at=now, events=())
        if state.state == "pending" and (now - state.active_at).total_seconds() >= (
            found.for_seconds
        ):
            return replace(current, state="firing", fired_at=now, events=("firing",))
        return replace(current, events=("updated",) if grew else ())
    if state.state == "pending":
        # The condition cleared before `for` elapsed: it never fired, so it just ends.
        return replace(state, state="resolved", resolved_at=now, events=("resolved",))
    if (now - state.last_seen_at).total_seconds() >= state.finding.resolve_after:
        return replace(state, state="resolved", resolved_at=now, events=("resolved",))
    return replace(state, events=())


def strongest_first(states: list[DecisionState]) -> list[DecisionState]:
    """DISABLE > ROLLBACK > QUARANTINE > DOWNGRADE > FAIL > REVIEW > PASS, then oldest first."""
    return sorted(states, key=lambda s: (s.strength, s.active_at))


def effective(states: list[DecisionState]) -> Decision:
    firing = [s.key.decision for s in states if s.state == "firing"]
    return min(firing, key=DECISION_STRENGTH.__getitem__, default=Decision.PASS)
