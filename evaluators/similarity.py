"""similarity: the run's final answer against the expected answer of its case, by embedding
cosine (a judge that needs no network).

A run is compared when it belongs to a case the rule knows (`expected`, by the case id the
run's spans carry: `dataset.example.id`, OpenLLMetry's association properties, ...) or, in
`sextant rules test`, when the case file gives `expect.answer`. The collector computes the
similarity (collector/judges/embedding.py); this module holds the rule and its verdict.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from evaluators.base import Finding, Verdict
from evaluators.model import Trajectory
from evaluators.rules import RuleBase


class SimilarityRule(RuleBase):
    type: Literal["similarity"]
    min_similarity: float = Field(
        gt=0, le=1, description="Pass at this cosine similarity to the expected answer or more."
    )
    expected: dict[str, str] = Field(
        default_factory=dict, description="Case id -> the answer a run of that case should give."
    )
    sample: float = Field(1.0, gt=0, le=1, description="Share of runs compared (trace id hash).")


def expected_answer(rule: SimilarityRule, t: Trajectory) -> str | None:
    return rule.expected.get(t.case_id) if t.case_id else None


def unanswered(t: Trajectory) -> Finding | None:
    """The verdict when there is nothing to compare: an incomplete run, or no answer at all."""
    if t.status == "incomplete":
        return Finding(
            Verdict.REVIEW,
            f"trace incomplete ({', '.join(t.incomplete_reasons)}): not compared",
            reason="trace_incomplete",
        )
    if not t.final_output:
        evidence = (t.root_span_id,) if t.root_span_id else ()
        return Finding(Verdict.FAIL, "the run gave no answer to compare", evidence)
    return None


def similarity_finding(rule: SimilarityRule, t: Trajectory, score: float) -> Finding:
    passed = score >= rule.min_similarity
    message = f"similarity {score:.3f} to the expected answer (min {rule.min_similarity:g})"
    evidence = () if passed or not t.root_span_id else (t.root_span_id,)
    return Finding(Verdict.PASS if passed else Verdict.FAIL, message, evidence, score)
