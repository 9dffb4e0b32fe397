"""A pack's promise about its review items: how long one may wait for a person (`review.sla`),
what the target's decision becomes when one waits longer, and which of its pass and fail
results go to its owner's queue as well, for audit (`review.audit`).

A REVIEW nobody answers is coverage lost, not a pass: past the SLA the decision engine raises
`coverage_lost_review_backlog` for the target whose run waits (collector/decisions/conditions.py).
An audit item is an optional quality check: it never counts toward that backlog.
"""

from __future__ import annotations

import hashlib
from dataclasses import replace
from typing import Literal

from pydantic import Field, model_validator

from evaluators.base import Decision, Result
from evaluators.durations import Seconds
from evaluators.matchers import Strict


def audit_sampled(trace_id: str, pack: str, share: float) -> bool:
    """Whether the pack audits the run: a hash of the trace id and the pack, so every replica,
    every restart and every revision of the run agree, one pack's sample is drawn apart from
    another's (and from the judges' sampling, which hashes the trace id alone), and a sampled
    run is audited on all of the pack's rules at once: a reviewer checks the whole run."""
    if share >= 1:
        return True
    digest = hashlib.sha256(f"audit\0{pack}\0{trace_id}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64 < share


class AuditSettings(Strict):
    """E.g. `audit: {sample: 0.05}`: one run in twenty that the pack passed or failed goes to its
    owner's queue too, so people check the rules' own verdicts, not only their REVIEWs."""

    sample: float = Field(
        gt=0,
        le=1,
        description="The share of the pack's runs audited (0 < sample <= 1), drawn by a hash of"
        " the trace id and the pack: the same run is audited on every replica, after a restart,"
        " and on all of the pack's rules.",
    )
    verdicts: tuple[Literal["pass", "fail"], ...] = Field(
        ("pass", "fail"),
        description="Which of the rules' verdicts are audited: pass, fail or both (the default).",
    )
    rules: tuple[str, ...] | None = Field(
        None,
        min_length=1,
        description="The rule ids audited (rules of this pack); unset: every rule of the pack.",
    )

    @model_validator(mode="after")
    def _some_verdict(self) -> AuditSettings:
        if not self.verdicts:
            raise ValueError("verdicts: give pass, fail or both (unset: both)")
        return self

    def audits(self, trace_id: str, pack: str, result: Result) -> bool:
        """Whether this result of the run goes to the queue for audit."""
        return (
            result.verdict.value in self.verdicts
            and (self.rules is None or result.rule_id in self.rules)
            and audit_sampled(trace_id, pack, self.sample)
        )


class ReviewSettings(Strict):
    """E.g. `review: {sla: 4h}`: a run the pack sends to review is labelled within 4 hours."""

    sla: Seconds | None = Field(
        None,
        description="How long a review item of the pack may wait for a human label (a duration:"
        " 30m, 4h, 2d); past it the target whose run waits gets coverage_lost_review_backlog."
        " Unset: no bound, and no backlog decision.",
    )
    decision: Decision = Field(
        Decision.REVIEW,
        description="The decision an overdue review item raises for its target: REVIEW, or one"
        " of the stronger decisions a policy may take (FAIL, DOWNGRADE, QUARANTINE, ROLLBACK,"
        " DISABLE); never PASS.",
    )

    audit: AuditSettings | None = Field(
        None,
        description="Send a sample of the pack's pass and fail results to its owner's queue for"
        " audit (`sample`, `verdicts`, `rules`); labelled like REVIEW items, never counted in"
        " the review.sla backlog. Unset: no audit.",
    )

    def marked(self, trace_id: str, pack: str, results: list[Result]) -> list[Result]:
        """The pack's results on a run, those it audits marked as such."""
        if self.audit is None:
            return results
        audit = self.audit
        return [replace(r, audit=True) if audit.audits(trace_id, pack, r) else r for r in results]

    @model_validator(mode="after")
    def _decides(self) -> ReviewSettings:
        if self.decision == Decision.PASS:
            raise ValueError("an overdue review decides something other than PASS")
        if "decision" in self.model_fields_set and self.sla is None:
            raise ValueError("review.decision applies to items past review.sla: give `sla` too")
        return self
