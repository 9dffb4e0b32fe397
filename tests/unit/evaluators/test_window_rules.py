"""Drift and reliability rules parse in packs (errors at file:line) and are skipped per run."""

from __future__ import annotations

import pytest

from evaluators.evaluate import evaluate_pack
from evaluators.rulepack import RulePackError, load_text
from tests.support.trajectories import llm
from tests.support.trajectories import run as make_run

HEAD = "name: p\nversion: '1'\nowner: me\n"


def load(rules: str, head: str = HEAD):  # type: ignore[no-untyped-def]
    return load_text(head + "rules:\n" + rules, "p.yaml").pack


def errors(rules: str, head: str = HEAD) -> list[str]:
    with pytest.raises(RulePackError) as caught:
        load(rules, head)
    return caught.value.errors


def test_a_canary_and_a_reliability_rule_parse_with_defaults() -> None:
    pack = load(
        "  - {id: c, type: drift, reason: r, on_fail: ROLLBACK,\n"
        "     compare: {baseline: {service.version: '1.4.*'},\n"
        "               candidate: {service.version: '1.5.*'}}}\n"
        "  - {id: r, type: reliability, reason: u, metric: pass_hat_k, k: 5, min: 0.9}\n"
    )
    drift, reliability = pack.rules
    assert drift.interval == 60 and drift.current.last == 3600 and drift.alpha == 0.01
    assert drift.compare.candidate.version == "1.5.*"
    assert drift.threshold("tool_choice") == 0.1 and len(drift.metrics) == 7
    assert (reliability.k, reliability.min, reliability.window.last) == (5, 0.9, 7 * 86400)


def test_durations() -> None:
    pack = load(
        "  - {id: d, type: drift, reason: r, interval: 5m, baseline: {last: 7d},"
        " current: {last: 90s, runs: 200}}\n"
    )
    rule = pack.rules[0]
    assert (rule.interval, rule.baseline.last, rule.current.last) == (300, 604800, 90)


@pytest.mark.parametrize(
    ("rules", "expected"),
    [
        (
            "  - {id: d, type: drift, reason: r}\n",
            ":5: rules[0](id=d): Value error, give exactly one of `baseline` or `compare`",
        ),
        (
            "  - {id: d, type: drift, reason: r, baseline: {last: soon}}\n",
            ":5: rules[0](id=d).baseline.last: Value error, expected a duration such as 60s",
        ),
        (
            "  - {id: d, type: drift, reason: r, baseline: {}}\n",
            "give one of `last`, `version` or `snapshot`",
        ),
        (
            "  - {id: d, type: drift, reason: r, baseline: {last: 1d}, metrics: [vibes]}\n",
            ":5: rules[0](id=d).metrics[0]: Input should be 'tool_choice'",
        ),
        (
            "  - {id: r, type: reliability, reason: u, metric: pass_hat_k, k: 0, min: 0.9}\n",
            ":5: rules[0](id=r).k: Input should be greater than or equal to 1",
        ),
        (
            "  - {id: r, type: reliability, reason: u, metric: pass_at_k, min: 2}\n",
            "rules[0](id=r).min: Input should be less than or equal to 1",
        ),
        (
            "  - {id: r, type: reliability, reason: u, metric: pass_at_k, min: 0.5,"
            " when: {input: x}}\n",
            "`when` filters single runs",
        ),
    ],
)
def test_bad_window_rules_are_refused_with_their_line(rules: str, expected: str) -> None:
    found = errors(rules)
    assert len(found) == 1 and expected in found[0], found
    assert found[0].startswith("p.yaml:")


def test_window_rules_refuse_attribute_selectors() -> None:
    head = HEAD + "selector: {attributes: {env: prod}}\n"
    [error] = errors("  - {id: d, type: drift, reason: r, baseline: {last: 1d}}\n", head)
    assert "window rules (drift, reliability) select targets by service" in error


def test_the_engine_skips_window_rules() -> None:
    pack = load(
        "  - {id: d, type: drift, reason: r, baseline: {last: 1d}}\n"
        "  - {id: b, type: budget, reason: over, max_steps: 100}\n"
    )
    results = evaluate_pack(make_run(llm(1)), pack)
    assert [r.rule_id for r in results] == ["b"]


def test_a_canary_is_anytime_valid_by_default_and_weights_name_metrics() -> None:
    canary = (
        "  - {id: c, type: drift, reason: r, on_fail: ROLLBACK,\n"
        "     compare: {baseline: {service.version: '1.4.*'},\n"
        "               candidate: {service.version: '1.5.*'}}"
    )
    [rule] = load(canary + "}\n").rules
    assert rule.is_sequential and rule.weight("pass_rate") == 4 and rule.weight("latency") == 1
    [rule] = load(canary + ", weights: {pass_rate:support/approval: 6, latency: 2}}\n").rules
    assert rule.weight("pass_rate:support/approval") == 6 and rule.weight("latency") == 2
    assert rule.weight("pass_rate:support/budget") == 4
    [rule] = load(canary + ", sequential: false}\n").rules
    assert not rule.is_sequential
    assert "weights: 'latncy' is not a metric" in errors(canary + ", weights: {latncy: 2}}\n")[0]
    assert "must be positive" in errors(canary + ", weights: {latency: 0}}\n")[0]
    week = "  - {id: w, type: drift, reason: r, baseline: {last: 7d}, sequential: true}\n"
    assert "`sequential` needs `compare`" in errors(week)[0]
