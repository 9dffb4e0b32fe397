"""Edge cases that must never give a silent pass or stop evaluation."""

from __future__ import annotations

import json

import pytest

from evaluators.base import Verdict
from evaluators.evaluate import evaluate_pack
from evaluators.rulepack import RulePack, RulePackError, load_text
from evaluators.secrets import DETECTORS, found
from tests.support.rules import APPROVAL, approval, pack, verdict
from tests.support.trajectories import llm, run, tool


def test_a_when_condition_that_raises_gives_review_not_silence() -> None:
    rule = {
        "id": "r",
        "type": "presence",
        "reason": "x",
        "step": {"kind": "llm"},
        "when": {"input": {"schema": {"$ref": "#/definitions/nope"}}},
    }
    (result,) = evaluate_pack(run(llm(1)), pack(rule))
    assert (result.verdict, result.reason) == (Verdict.REVIEW, "evaluator_error")


def test_root_conditions_on_a_run_without_root_give_review() -> None:
    t = run(llm(1), status="incomplete", reasons=["root_missing"])
    t.root_span_id = None
    rule = {
        "id": "r",
        "type": "presence",
        "reason": "x",
        "step": {"kind": "llm"},
        "when": {"attributes": {"tenant": "acme"}},
    }
    (result,) = evaluate_pack(t, pack(rule))
    assert (result.verdict, result.reason) == (Verdict.REVIEW, "trace_incomplete")
    selective = RulePack.model_validate(
        {
            "name": "p",
            "version": "1",
            "owner": "o",
            "selector": {"attributes": {"tenant": "acme"}},
            "rules": [{**rule, "when": None}],
        }
    )
    (result,) = evaluate_pack(t, selective)
    assert result.verdict == Verdict.REVIEW


def test_incomplete_runs_never_pass_a_rule() -> None:
    incomplete = run(tool(1, "get_account"), status="incomplete", reasons=["build_error"])
    absence = {"id": "r", "type": "absence", "reason": "forbidden", "step": {"name": "delete_*"}}
    assert verdict(absence, incomplete).verdict == Verdict.REVIEW
    required = {
        "id": "r",
        "type": "tool_args",
        "reason": "bad",
        "step": {"name": "pay"},
        "args": {"x": 1},
        "required": True,
    }
    assert verdict(required, incomplete).verdict == Verdict.REVIEW


def test_unknown_prices_make_a_cost_budget_review() -> None:
    rule = {"id": "r", "type": "budget", "reason": "budget_exceeded", "max_cost_usd": 1.0}
    unpriced = run(llm(1))  # no cost known for this model call
    result = verdict(rule, unpriced)
    assert (result.verdict, result.reason) == (Verdict.REVIEW, "cost_unknown")


def test_cards_next_to_other_numbers_are_found() -> None:
    card = DETECTORS["credit_card"]
    assert found("credit_card", card, "order 7 4111 1111 1111 1111")
    assert found("credit_card", card, "call 555 4111111111111111")
    assert not found("credit_card", card, "1234 5678 9012 3456")


def test_any_order_matches_narrow_matchers_first() -> None:
    rule = {
        "id": "r",
        "type": "trajectory",
        "reason": "path",
        "order": "any_order",
        "expected": [{"name": "a*"}, {"name": "ab"}],
    }
    assert verdict(rule, run(tool(1, "ab"), tool(2, "ax"))).verdict == Verdict.PASS


def test_strict_with_a_matcher_of_any_kind() -> None:
    rule = {
        "id": "r",
        "type": "trajectory",
        "reason": "path",
        "order": "strict",
        "expected": [{"kind": "llm"}, {"name": "search"}],
    }
    assert verdict(rule, run(llm(1), tool(2, "search"))).verdict == Verdict.PASS


def test_an_approval_in_an_earlier_sibling_subtree_counts() -> None:
    write = tool(1, "update_account", depth=2)  # earlier in depth-first order...
    earlier = approval(2)
    write.start_time_unix_nano = earlier.end_time_unix_nano + 10_000_000  # ...but later in time
    assert verdict(APPROVAL, run(write, earlier)).verdict == Verdict.PASS


def test_equals_one_does_not_match_true() -> None:
    rule = {"id": "r", "type": "presence", "reason": "x", "step": {"attributes": {"flag": 1}}}
    assert verdict(rule, run(tool(1, "t", attrs={"flag": True}))).verdict == Verdict.FAIL


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("name: p\nversion: '1'\nowner: o\nx: &a [1]\ny: *a\nrules: []\n", "aliases"),
        (
            "name: p\nversion: '1'\nowner: o\nrules:\n  - {id: r, type: recovery, reason: x,"
            " on_fail: PASS}\n",
            "cannot ask for PASS",
        ),
        ("x: " + "[" * 3000 + "]" * 3000, "nested too deeply|not valid YAML"),
    ],
    ids=["alias", "on_fail PASS", "deep"],
)
def test_hostile_packs_are_refused(text: str, message: str) -> None:
    with pytest.raises(RulePackError, match=message):
        load_text(text, "p.yaml")


def test_json_nulls_and_lenient_base64() -> None:
    from tests.support.reference.otlp_json import traces_from_json

    doc = {
        "resourceSpans": [
            {
                "resource": {
                    "attributes": [
                        {"key": "a", "value": {"stringValue": None}},
                        {"key": "b", "value": {"bytesValue": "YWI"}},
                        {"key": "c", "value": {"bytesValue": "-_8="}},
                        {"key": "d", "value": {}},
                    ]
                }
            }
        ]
    }
    attrs = traces_from_json(json.dumps(doc).encode()).resource_spans[0].resource.attributes
    assert [kv.value.WhichOneof("value") for kv in attrs] == [
        None,
        "bytes_value",
        "bytes_value",
        None,
    ]
    assert attrs[1].value.bytes_value == b"ab"
    assert all(kv.HasField("value") for kv in attrs)
