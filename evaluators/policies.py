"""Decision policies of a pack: which results, how many, over what window, make which decision.

A policy is data; the collector's decision engine counts matching results in the store and runs
the pending → firing → resolved state machine. Without a policy, a failed rule's `on_fail`
applies on its first failure. A policy counts its own pack's results unless it names others:
`pack:` in `when`, or a pack-qualified rule (`default/secret-*`); the decision is always the
policy pack's, with its owner.
"""

from __future__ import annotations

import re

from pydantic import Field, field_validator, model_validator

from evaluators.base import Decision, Severity, Verdict
from evaluators.durations import parse_duration
from evaluators.matchers import Strict, text_matches

SEVERITY_RANK = {s: i for i, s in enumerate(Severity)}


class PolicyMatch(Strict):
    """Which results count; every given field must hold, lists mean any of."""

    pack: list[str] | None = Field(
        None, description="Packs whose results count (globs allowed); the policy's own when unset."
    )
    rule: list[str] | None = Field(
        None,
        description="Rule ids (globs allowed), of the packs counted, or pack-qualified"
        " (`default/secret-*`) to name another pack's rules.",
    )
    reason: list[str] | None = Field(None, description="Reason codes (globs allowed).")
    severity: Severity | None = Field(None, description="At least this severity.")
    verdict: list[Verdict] = Field(
        default_factory=lambda: [Verdict.FAIL], description="Result verdicts that count."
    )

    @field_validator("pack", "rule", "reason", mode="before")
    @classmethod
    def _listify(cls, value: object) -> object:
        return [value] if isinstance(value, str) else value

    @field_validator("pack")
    @classmethod
    def _pack_globs(cls, value: list[str] | None) -> list[str] | None:
        for pattern in value or ():
            if not PACK_GLOB.match(pattern):
                raise ValueError(f"{pattern!r} is not a pack name or glob (e.g. default, shop-*)")
        return value

    @field_validator("rule")
    @classmethod
    def _qualified(cls, value: list[str] | None) -> list[str] | None:
        for pattern in value or ():
            pack, slash, rule = pattern.rpartition("/")
            if slash and not (PACK_GLOB.match(pack) and rule):
                raise ValueError(
                    f"{pattern!r}: a pack-qualified rule is `<pack>/<rule id>`, both given, the"
                    " pack a pack name or glob (e.g. default/secret-*)"
                )
        return value

    def matches(
        self,
        own_pack: str,
        result: tuple[str, str, str | None, str | None, str],
    ) -> bool:
        """Whether a result (pack, rule id, reason, severity, verdict) counts for a policy of
        `own_pack`."""
        pack, rule_id, reason, severity, verdict = result
        if verdict not in self.verdict:
            return False
        packs = self.pack or [own_pack]
        if self.rule is None:
            if not text_matches(packs, pack):
                return False
        elif not any(rule_matches(p, packs, pack, rule_id) for p in self.rule):
            return False
        if self.reason is not None and not any(text_matches(p, reason) for p in self.reason):
            return False
        if self.severity is not None:
            try:
                rank = SEVERITY_RANK[Severity(severity or "")]
            except ValueError:
                return False
            return rank >= SEVERITY_RANK[self.severity]
        return True


PACK_GLOB = re.compile(r"^[a-z0-9_.*?\[\]-]+$")


def rule_matches(pattern: str, packs: list[str], pack: str, rule_id: str) -> bool:
    """`pattern` is a rule id glob of `packs`, or `<pack glob>/<rule id glob>`."""
    qualifier, slash, rule = pattern.rpartition("/")
    if slash:
        return text_matches(qualifier, pack) and text_matches(rule, rule_id)
    return text_matches(packs, pack) and text_matches(pattern, rule_id)


class DecisionPolicy(Strict):
    """E.g. QUARANTINE when reason approval_boundary_violation occurs ≥ 1 time in 5m."""

    id: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$", description="Unique in the pack.")
    decision: Decision = Field(description="What the policy decides when its condition holds.")
    when: PolicyMatch = Field(description="Which results count towards the condition.")
    count: int = Field(1, ge=1, description="At least this many matching runs in the window.")
    window: float = Field(600.0, gt=0, description="Sliding window the count is taken over.")
    for_seconds: float = Field(
        0.0, alias="for", ge=0, description="The condition holds this long before firing."
    )
    resolve_after: float = Field(
        300.0, ge=0, description="A firing decision resolves once clear for this long."
    )
    summary: str = Field("", description="One line for the alert; the reasons when empty.")

    @field_validator("window", "for_seconds", "resolve_after", mode="before")
    @classmethod
    def _duration(cls, value: object) -> float:
        return parse_duration(value)

    @model_validator(mode="after")
    def _not_pass(self) -> DecisionPolicy:
        if self.decision == Decision.PASS:
            raise ValueError("a policy decides something other than PASS")
        return self
