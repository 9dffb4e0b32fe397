"""A pack's `review.audit`: which of its pass and fail results go to its owner's queue, drawn
the same way on every replica, and a broken block refused with file, line and field."""

from __future__ import annotations

import secrets
from dataclasses import replace

import pytest

from evaluators.evaluate import evaluate_pack
from evaluators.review_sla import AuditSettings, audit_sampled
from evaluators.rulepack import RulePackError, load_text
from tests.support.trajectories import run, tool

IDS = [f"{i:032x}" for i in range(10_000)]


def pack(review: str) -> str:
    return f"""name: refunds
version: "1.0.0"
owner: refunds-reviewers
{review}
rules:
  - id: looks-up
    type: presence
    reason: no_lookup
    step: {{kind: tool, name: lookup_customer}}
  - id: no-refund
    type: absence
    reason: refund_issued
    step: {{kind: tool, name: issue_refund}}
"""


def test_the_sample_is_the_same_every_time_and_apart_per_pack() -> None:
    first = [audit_sampled(t, "refunds", 0.05) for t in IDS]
    assert first == [audit_sampled(t, "refunds", 0.05) for t in IDS]  # a restart, a replica
    other = [audit_sampled(t, "payments", 0.05) for t in IDS]
    assert first != other  # another pack draws its own runs
    # a larger share keeps the runs a smaller one took (raising it never drops an item)
    wider = [audit_sampled(t, "refunds", 0.2) for t in IDS]
    assert all(w for f, w in zip(first, wider, strict=True) if f)


@pytest.mark.parametrize("share", [0.01, 0.05, 0.5])
def test_the_share_audited_is_the_sample_within_binomial_bounds(share: float) -> None:
    taken = sum(audit_sampled(t, "refunds", share) for t in IDS)
    sd = (len(IDS) * share * (1 - share)) ** 0.5
    assert abs(taken - len(IDS) * share) < 4 * sd, taken
    random_ids = [secrets.token_hex(16) for _ in range(10_000)]
    taken = sum(audit_sampled(t, "refunds", share) for t in random_ids)
    assert abs(taken - len(IDS) * share) < 4 * sd, taken


def test_a_sampled_run_is_audited_on_every_rule_the_filters_keep() -> None:
    t = run(tool(1, "lookup_customer"))  # looks-up passes, no-refund passes
    loaded = load_text(pack("review: {audit: {sample: 1.0}}"), "refunds.yaml").pack
    results = evaluate_pack(t, loaded)
    assert [(r.rule_id, r.verdict.value, r.audit) for r in results] == [
        ("looks-up", "pass", True),
        ("no-refund", "pass", True),
    ]
    only = load_text(pack("review: {audit: {sample: 1.0, rules: [no-refund]}}"), "r.yaml").pack
    assert [r.audit for r in evaluate_pack(t, only)] == [False, True]
    fails = load_text(pack("review: {audit: {sample: 1.0, verdicts: [fail]}}"), "r.yaml").pack
    assert [r.audit for r in evaluate_pack(t, fails)] == [False, False]
    failing = run(tool(1, "issue_refund"))  # both rules fail
    assert [(r.verdict.value, r.audit) for r in evaluate_pack(failing, fails)] == [
        ("fail", True),
        ("fail", True),
    ]
    none = load_text(pack(""), "refunds.yaml").pack
    assert not any(r.audit for r in evaluate_pack(t, none))


def test_a_run_outside_the_sample_is_audited_on_no_rule() -> None:
    settings = AuditSettings(sample=0.5)
    t = run(tool(1, "lookup_customer"))
    outside = next(i for i in IDS if not audit_sampled(i, "refunds", 0.5))
    inside = next(i for i in IDS if audit_sampled(i, "refunds", 0.5))
    loaded = load_text(pack("review: {audit: {sample: 0.5}}"), "refunds.yaml").pack
    assert loaded.review.audit == settings
    assert not any(r.audit for r in evaluate_pack(replace(t, trace_id=outside), loaded))
    assert all(r.audit for r in evaluate_pack(replace(t, trace_id=inside), loaded))


def test_a_review_is_never_an_audit() -> None:
    t = run(tool(1, "lookup_customer"), reasons=["root_missing"], status="incomplete")
    loaded = load_text(pack("review: {audit: {sample: 1.0}}"), "refunds.yaml").pack
    for r in evaluate_pack(t, loaded):
        assert r.audit == (r.verdict.value in ("pass", "fail"))


@pytest.mark.parametrize(
    ("review", "error"),
    [
        ("review: {audit: {sample: 0}}", ":4: review.audit.sample: Input should be greater than 0"),
        ("review: {audit: {sample: 1.5}}", ":4: review.audit.sample: Input should be less than"),
        ("review: {audit: {}}", ":4: review.audit.sample: Field required"),
        (
            "review: {audit: {sample: 0.1, verdicts: [review]}}",
            ":4: review.audit.verdicts[0]: Input should be 'pass' or 'fail'",
        ),
        (
            "review: {audit: {sample: 0.1, rules: [looks_up]}}",
            ":4: review: Value error, audit.rules: no rule 'looks_up' in this pack; its rules"
            " are looks-up, no-refund",
        ),
        ("review: {audit: {sample: 0.1, rate: 2}}", ":4: review.audit.rate: unknown key"),
    ],
)
def test_what_an_audit_cannot_be(review: str, error: str) -> None:
    with pytest.raises(RulePackError) as caught:
        load_text(pack(review), "refunds.yaml")
    [message] = caught.value.errors
    assert message.startswith("refunds.yaml" + error), message


def test_the_audit_block_is_refused_at_its_own_line() -> None:
    text = pack("review:\n  sla: 4h\n  audit:\n    sample: 5%")
    with pytest.raises(RulePackError) as caught:
        load_text(text, "refunds.yaml")
    [message] = caught.value.errors
    assert message.startswith("refunds.yaml:7: review.audit.sample: Input should be a valid")
