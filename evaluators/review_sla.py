"""A pack's promise about its review items: how long one may wait for a person (`review.sla`),
and what the target's decision becomes when one waits longer.

A REVIEW nobody answers is coverage lost, not a pass: past the SLA the decision engine raises
`coverage_lost_review_backlog` for the target whose run waits (collector/decisions/conditions.py).
"""

from __future__ import annotations

from pydantic import Field, model_validator

from evaluators.base import Decision
from evaluators.durations import Seconds
from evaluators.matchers import Strict


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

    @model_validator(mode="after")
    def _decides(self) -> ReviewSettings:
        if self.decision == Decision.PASS:
            raise ValueError("an overdue review decides something other than PASS")
        if "decision" in self.model_fields_set and self.sla is None:
            raise ValueError("review.decision applies to items past review.sla: give `sla` too")
        return self
