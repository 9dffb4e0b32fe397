"""Lists of globs in selectors and step matchers; loops back to back vs repeats anywhere."""

from __future__ import annotations

import pytest

from evaluators.base import Verdict
from evaluators.evaluate import evaluate_pack
from evaluators.rulepack import RulePack, RulePackError, load_text
from tests.support.rules import verdict
from tests.support.trajectories import llm, run, tool

PRESENCE = {"id": "r", "type": "presence", "reason": "search_missing", "step": {"kind": "llm"}}


def selecting(**selector: object) -> RulePack:
    return RulePack.model_validate(
        {"name": "p", "version": "1", "owner": "o", "selector": selector, "rules": [PRESENCE]}
    )


@pytest.mark.parametrize(
    ("selector", "applies"),
    [
        ({"agent": ["paper-*", "support-*"]}, True),
        ({"agent": ["paper-*", "travel-agent"]}, False),
        ({"service": ["billing", "supp*"], "version": ["0.*", "1.0"]}, True),
        ({"service": ["billing", "supp*"], "version": ["2.*"]}, False),
        ({"agent": "support-agent"}, True),  # one glob still works
    ],
)
def test_a_selector_field_takes_a_list_of_globs_any_of_which_matches(
    selector: dict, applies: bool
) -> None:
    results = evaluate_pack(run(llm(1)), selecting(**selector))  # support / support-agent / 1.0
    assert len(results) == (1 if applies else 0)


def test_a_step_matchers_name_and_agent_take_a_list_of_globs() -> None:
    rule = {
        "id": "r",
        "type": "absence",
        "reason": "forbidden_write",
        "step": {"name": ["delete_*", "wire_money"], "agent": ["support-*", "triage"]},
    }
    bad = run(tool(1, "get_account"), tool(2, "wire_money"), tool(3, "delete_note"))
    result = verdict(rule, bad)
    assert (result.verdict, result.evidence) == (Verdict.FAIL, ("s02", "s03"))
    elsewhere = run(tool(1, "wire_money", agent="billing-agent"))
    assert verdict(rule, elsewhere).verdict == Verdict.PASS
    assert verdict(rule, run(tool(1, "get_account"))).verdict == Verdict.PASS


LOOP = {"id": "r", "type": "budget", "reason": "tool_loop", "max_consecutive_same_call": 2}
ANYWHERE = {"id": "r", "type": "budget", "reason": "tool_loop", "max_same_call": 2}


def test_a_loop_is_the_same_call_back_to_back_a_repeat_is_the_same_call_anywhere() -> None:
    # lookup(1) three times, but never twice in a row: a repeat, not a loop.
    spread = run(
        tool(1, "lookup", {"id": 1}),
        tool(2, "search", {"q": "a"}),
        tool(3, "lookup", {"id": 1}),
        llm(4),
        tool(5, "search", {"q": "b"}),
        tool(6, "lookup", {"id": 1}),
    )
    assert verdict(LOOP, spread).verdict == Verdict.PASS
    repeat = verdict(ANYWHERE, spread)
    assert (repeat.verdict, repeat.evidence) == (Verdict.FAIL, ("s01", "s03", "s06"))

    # Three in a row (a model call between tool calls does not break the run of tool calls).
    looping = run(
        tool(1, "lookup", {"id": 1}),
        tool(2, "lookup", {"id": 2}),
        tool(3, "lookup", {"id": 2}),
        llm(4),
        tool(5, "lookup", {"id": 2}),
        tool(6, "lookup", {"id": 1}),
    )
    loop = verdict(LOOP, looping)
    assert (loop.verdict, loop.reason, loop.evidence) == (
        Verdict.FAIL,
        "tool_loop",
        ("s02", "s03", "s05"),
    )
    assert "lookup called 3 times in a row with the same arguments (> 2)" in loop.message
    # Different arguments break a loop.
    varied = run(*[tool(i, "lookup", {"id": i}) for i in range(1, 6)])
    assert verdict(LOOP, varied).verdict == Verdict.PASS


BAD_LISTS = """name: p
version: "1"
owner: o
selector:
  agent: []
rules:
  - id: r
    type: absence
    reason: forbidden_write
    step: {name: ["delete_*", ""]}
decisions:
  - id: leaks
    decision: DISABLE
    when: {rule: "Default/secret-*"}
  - id: other
    decision: REVIEW
    when: {pack: "shop/x", reason: r}
"""


def test_bad_lists_and_cross_pack_references_are_refused_with_file_line_and_field() -> None:
    with pytest.raises(RulePackError) as caught:
        load_text(BAD_LISTS, "bad.yaml")
    errors = caught.value.errors
    expected = [
        "bad.yaml:5: selector.agent: Value error, give a glob or a non-empty list",
        "bad.yaml:10: rules[0](id=r).step.name: Value error, give a glob or a non-empty list",
        "bad.yaml:14: decisions[0](id=leaks).when.rule: Value error, 'Default/secret-*':"
        " a pack-qualified rule is `<pack>/<rule id>`",
        "bad.yaml:17: decisions[1](id=other).when.pack: Value error, 'shop/x' is not a pack",
    ]
    assert len(errors) == len(expected), errors
    for error, start in zip(errors, expected, strict=True):
        assert error.startswith(start), error


def test_a_pack_of_decision_policies_alone_loads_an_empty_one_does_not() -> None:
    policies = (
        "name: p\nversion: '1'\nowner: o\n"
        "decisions:\n  - {id: d, decision: REVIEW, when: {pack: '*'}}\n"
    )
    assert load_text(policies, "only.yaml").pack.rules == []
    with pytest.raises(RulePackError, match="a pack holds rules, decision policies"):
        load_text("name: p\nversion: '1'\nowner: o\n", "empty.yaml")
