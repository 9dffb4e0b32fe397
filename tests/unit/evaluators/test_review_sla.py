"""A pack's `review:` block: the SLA is a duration like every other, and a broken one is refused
with file, line and field."""

from __future__ import annotations

import pytest

from evaluators.base import Decision
from evaluators.rulepack import RulePackError, load_pack, load_text
from tests.support.paths import TESTDATA

BAD = TESTDATA / "rules" / "bad" / "review_sla.yaml"


def pack(review: str) -> str:
    good = BAD.read_text().split("rules:")[1]
    return f'name: refunds\nversion: "1.0.0"\nowner: refunds-reviewers\n{review}\nrules:{good}'


def test_a_broken_sla_is_refused_at_its_line() -> None:
    with pytest.raises(RulePackError) as caught:
        load_pack(BAD)
    assert caught.value.errors == [
        f"{BAD}:5: review.sla: Value error, expected a duration such as 60s, 5m, 1h or 7d,"
        " got '4 hours'"
    ]


@pytest.mark.parametrize(
    ("review", "sla", "decision"),
    [
        ("", None, Decision.REVIEW),
        ("review: {sla: 4h}", 14400.0, Decision.REVIEW),
        ("review: {sla: 90, decision: FAIL}", 90.0, Decision.FAIL),
    ],
)
def test_the_sla_is_optional_and_review_is_the_default_decision(
    review: str, sla: float | None, decision: Decision
) -> None:
    settings = load_text(pack(review), "refunds.yaml").pack.review
    assert (settings.sla, settings.decision) == (sla, decision)


@pytest.mark.parametrize(
    ("review", "error"),
    [
        ("review: {sla: 0s}", ":4: review.sla: Input should be greater than 0"),
        ("review: {sla: -1}", ":4: review.sla: Value error, a duration is not negative"),
        ("review: {sla: 1h, decision: PASS}", ":4: review: Value error, an overdue review decides"),
        ("review: {decision: FAIL}", ":4: review: Value error, review.decision applies to items"),
        ("review: {sla: 1h, slo: 2h}", ":4: review.slo: unknown key"),
    ],
)
def test_what_an_sla_cannot_be(review: str, error: str) -> None:
    with pytest.raises(RulePackError) as caught:
        load_text(pack(review), "refunds.yaml")
    [message] = caught.value.errors
    assert message.startswith("refunds.yaml" + error), message
