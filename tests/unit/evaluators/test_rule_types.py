"""Each rule type on hand-built runs: pass, fail, edge cases, reason codes and evidence."""

from __future__ import annotations

import pytest

from evaluators.base import Verdict
from evaluators.evaluate import evaluate_pack
from evaluators.rulepack import RulePack
from tests.support.rules import APPROVAL, approval, pack, verdict
from tests.support.trajectories import llm, run, tool

PRESENCE = {
    "id": "r",
    "type": "presence",
    "reason": "search_missing",
    "step": {"kind": "tool", "name": "search_papers"},
}


def test_presence() -> None:
    ok = verdict(PRESENCE, run(llm(1), tool(2, "search_papers", {"q": "x"})))
    assert (ok.verdict, ok.evidence) == (Verdict.PASS, ("s02",))
    missing = verdict(PRESENCE, run(llm(1)))
    assert (missing.verdict, missing.reason, missing.evidence) == (
        Verdict.FAIL,
        "search_missing",
        (),
    )
    assert "occurred 0 times" in missing.message
    at_most = {**PRESENCE, "min_count": 0, "max_count": 1}
    twice = verdict(at_most, run(tool(1, "search_papers"), tool(2, "search_papers")))
    assert (twice.verdict, twice.evidence) == (Verdict.FAIL, ("s01", "s02"))
    empty = verdict(PRESENCE, run())
    assert empty.verdict == Verdict.FAIL


def test_absence_step_and_allow_list() -> None:
    rule = {"id": "r", "type": "absence", "reason": "forbidden_tool", "step": {"name": "delete_*"}}
    assert verdict(rule, run(tool(1, "get_account"))).verdict == Verdict.PASS
    bad = verdict(rule, run(tool(1, "get_account"), tool(2, "delete_account")))
    assert (bad.verdict, bad.reason, bad.evidence) == (Verdict.FAIL, "forbidden_tool", ("s02",))
    allow = {
        "id": "r",
        "type": "absence",
        "reason": "tool_outside_allow_list",
        "allowed_tools": ["get_*", "send_email"],
    }
    outside = verdict(allow, run(tool(1, "get_account"), tool(2, "wire_money")))
    assert (outside.verdict, outside.evidence) == (Verdict.FAIL, ("s02",))
    assert "wire_money" in outside.message


ORDER = [{"kind": "tool", "name": "search"}, {"kind": "tool", "name": "read"}, {"kind": "llm"}]


@pytest.mark.parametrize(
    ("order", "steps", "rate", "passed"),
    [
        ("strict", ["search", "read", "llm"], 1.0, True),
        ("strict", ["search", "other", "read", "llm"], 1 / 3, False),  # a tool in between
        ("in_order", ["search", "other", "read", "llm"], 1.0, True),
        ("in_order", ["read", "search", "llm"], 2 / 3, False),
        ("any_order", ["llm", "read", "search"], 1.0, True),
        ("any_order", ["llm", "search"], 2 / 3, False),
    ],
)
def test_trajectory_orders(order: str, steps: list[str], rate: float, passed: bool) -> None:
    rule = {"id": "r", "type": "trajectory", "reason": "path", "expected": ORDER, "order": order}
    built = [llm(i + 1) if n == "llm" else tool(i + 1, n) for i, n in enumerate(steps)]
    result = verdict(rule, run(*built))
    assert result.score == pytest.approx(rate)
    assert result.verdict == (Verdict.PASS if passed else Verdict.FAIL)


def test_trajectory_min_match_rate() -> None:
    rule = {
        "id": "r",
        "type": "trajectory",
        "reason": "path",
        "expected": ORDER,
        "order": "in_order",
        "min_match_rate": 0.6,
    }
    result = verdict(rule, run(tool(1, "search"), llm(2)))
    assert (result.verdict, result.score) == (Verdict.PASS, pytest.approx(2 / 3))


def test_tool_args() -> None:
    rule = {
        "id": "r",
        "type": "tool_args",
        "reason": "bad_args",
        "step": {"name": "search_papers"},
        "args": {
            "$.year_from": {"gte": 2020},
            "query": {"regex": "agent"},
            "$.filters.lang": {"one_of": ["en", "de"]},
        },
    }
    good = tool(
        1, "search_papers", {"query": "agents", "year_from": 2023, "filters": {"lang": "en"}}
    )
    assert verdict(rule, run(good)).verdict == Verdict.PASS
    bad = tool(
        2, "search_papers", {"query": "agents", "year_from": 2001, "filters": {"lang": "fr"}}
    )
    result = verdict(rule, run(good, bad))
    assert (result.verdict, result.evidence, result.score) == (Verdict.FAIL, ("s02",), 0.5)
    assert "$.year_from" in result.message and "$.filters.lang" in result.message
    assert verdict(rule, run(llm(1))).verdict == Verdict.NOT_APPLICABLE
    assert verdict({**rule, "required": True}, run(llm(1))).verdict == Verdict.FAIL
    schema = {
        "id": "r",
        "type": "tool_args",
        "reason": "bad_args",
        "step": {"name": "pay"},
        "args": {"amount": {"schema": {"type": "number", "maximum": 500}}},
    }
    assert verdict(schema, run(tool(1, "pay", {"amount": 900}))).verdict == Verdict.FAIL


def test_precedes_approval_before_write() -> None:
    ok = verdict(APPROVAL, run(approval(1), tool(2, "update_account")))
    assert ok.verdict == Verdict.PASS
    none = verdict(APPROVAL, run(tool(1, "get_account"), tool(2, "update_account")))
    assert (none.verdict, none.reason, none.evidence) == (
        Verdict.FAIL,
        "approval_boundary_violation",
        ("s02",),
    )
    after = verdict(APPROVAL, run(tool(1, "update_account"), approval(2)))
    assert after.verdict == Verdict.FAIL  # approval after the write does not count
    denied = verdict(APPROVAL, run(approval(1, "denied"), tool(2, "update_account")))
    assert denied.verdict == Verdict.FAIL
    errored = verdict(
        APPROVAL,
        run(
            tool(
                1,
                "request_approval",
                {},
                status="error",
                attrs={"sextant.approval.status": "approved"},
            ),
            tool(2, "update_account"),
        ),
    )
    assert errored.verdict == Verdict.FAIL  # require_ok
    assert verdict(APPROVAL, run(tool(1, "get_account"))).verdict == Verdict.NOT_APPLICABLE
    two = verdict(APPROVAL, run(approval(1), tool(2, "update_account"), tool(3, "update_email")))
    assert (two.verdict, two.evidence) == (Verdict.PASS, ("s02", "s03"))


def test_precedes_same_agent_for_nested_agents() -> None:
    rule = {**APPROVAL, "same_agent": True}
    other = verdict(rule, run(approval(1, agent="helper"), tool(2, "update_account")))
    assert other.verdict == Verdict.FAIL


def test_consistency_authorization_context() -> None:
    rule = {
        "id": "r",
        "type": "consistency",
        "reason": "wrong_authorization_context",
        "step": {"kind": "tool"},
        "attribute": "enduser.id",
    }
    root = {"enduser.id": "mira"}
    same = run(tool(1, "get_account", attrs={"enduser.id": "mira"}), root_attrs=root)
    assert verdict(rule, same).verdict == Verdict.PASS
    wrong = run(
        tool(1, "get_account", attrs={"enduser.id": "mira"}),
        tool(2, "update_account", attrs={"enduser.id": "admin"}),
        root_attrs=root,
    )
    result = verdict(rule, wrong)
    assert (result.verdict, result.evidence) == (Verdict.FAIL, ("s02",))
    missing = run(tool(1, "get_account"), root_attrs=root)
    assert verdict(rule, missing).verdict == Verdict.FAIL
    assert verdict({**rule, "missing": "pass"}, missing).verdict == Verdict.PASS
    no_root = run(tool(1, "get_account", attrs={"enduser.id": "mira"}))
    assert verdict(rule, no_root).verdict == Verdict.REVIEW


def test_budget_limits_loops_and_redundancy() -> None:
    loop = {"id": "r", "type": "budget", "reason": "tool_loop", "max_same_call": 5}
    six = run(*[tool(i, "lookup", {"id": 1}) for i in range(1, 7)])
    result = verdict(loop, six)
    assert (result.verdict, result.reason, len(result.evidence)) == (Verdict.FAIL, "tool_loop", 6)
    varied = run(*[tool(i, "lookup", {"id": i}) for i in range(1, 7)])
    assert verdict(loop, varied).verdict == Verdict.PASS
    redundancy = {"id": "r", "type": "budget", "reason": "redundant", "max_same_tool": 5}
    assert verdict(redundancy, varied).verdict == Verdict.FAIL
    sizes = {
        "id": "r",
        "type": "budget",
        "reason": "budget_exceeded",
        "max_llm_calls": 1,
        "max_tokens": 1000,
        "max_duration_ms": 120_000,
    }
    result = verdict(sizes, run(llm(1), llm(2)))
    assert result.verdict == Verdict.FAIL and "LLM calls 2 > 1" in result.message
    assert verdict({**sizes, "max_llm_calls": 2}, run(llm(1), llm(2))).verdict == Verdict.PASS


def test_recovery() -> None:
    rule = {"id": "r", "type": "recovery", "reason": "error_without_recovery"}
    retried = run(tool(1, "hold_seat", status="error"), tool(2, "hold_seat"), llm(3))
    assert verdict(rule, retried).verdict == Verdict.PASS
    ends_failed = run(llm(1), tool(2, "hold_seat", status="error"), final=None)
    result = verdict(rule, ends_failed)
    assert (result.verdict, result.evidence) == (Verdict.FAIL, ("s02",))
    handled = run(tool(1, "hold_seat", status="error"), llm(2), final="Sorry, no seats.")
    assert verdict(rule, handled).verdict == Verdict.PASS
    silent = run(llm(1), status="error", final=None)
    assert verdict(rule, silent).verdict == Verdict.FAIL


def test_secrets_name_the_step_never_the_secret() -> None:
    rule = {
        "id": "r",
        "type": "secrets",
        "reason": "secret_in_tool_call",
        "detectors": ["api_key", "credit_card", "email"],
    }
    clean = run(tool(1, "pay", {"token": "tok_test_5521", "amount": 12}))
    assert verdict(rule, clean).verdict == Verdict.PASS
    leaky = run(
        tool(1, "pay", {"card": "4111 1111 1111 1111"}),
        tool(2, "call_api", {"key": "sk-abcdefghijklmnopqrstuvwxyz"}),
        tool(3, "notify", result="mail sent to mira@example.com"),
    )
    result = verdict(rule, leaky)
    assert (result.verdict, result.evidence) == (Verdict.FAIL, ("s01", "s02", "s03"))
    assert "credit_card in the arguments of pay" in result.message
    assert "4111" not in result.message and "sk-abc" not in result.message
    not_luhn = run(tool(1, "order", {"number": "1234 5678 9012 3456"}))
    assert verdict(rule, not_luhn).verdict == Verdict.PASS
    custom = {**rule, "detectors": [], "patterns": {"ssn": r"\b\d{3}-\d{2}-\d{4}\b"}}
    assert verdict(custom, run(tool(1, "f", {"x": "123-45-6789"}))).verdict == Verdict.FAIL


def test_incomplete_runs_are_reviewed_not_passed() -> None:
    incomplete = run(
        approval(1), tool(2, "update_account"), status="incomplete", reasons=["root_missing"]
    )
    result = verdict(APPROVAL, incomplete)
    assert (result.verdict, result.reason) == (Verdict.REVIEW, "trace_incomplete")
    forbidden = {
        "id": "r",
        "type": "absence",
        "reason": "forbidden_tool",
        "step": {"name": "update_*"},
    }
    assert verdict(forbidden, incomplete).verdict == Verdict.FAIL  # a seen step is proof


def test_an_evaluator_that_raises_gives_review() -> None:
    rule = {
        "id": "r",
        "type": "tool_args",
        "reason": "bad_args",
        "step": {"name": "f"},
        "args": {"x": {"gt": 1}},
    }
    broken = run(tool(1, "f", {"x": 2}))
    from evaluators import tool_args

    original = tool_args.at_path
    tool_args.at_path = lambda *a: 1 / 0
    try:
        result = verdict(rule, broken)
    finally:
        tool_args.at_path = original
    assert (result.verdict, result.reason) == (Verdict.REVIEW, "evaluator_error")
    assert "ZeroDivisionError" in result.message


def test_when_and_selector() -> None:
    rule = {**PRESENCE, "when": {"input": {"regex": "paper"}}}
    assert evaluate_pack(run(llm(1)), pack(rule)) == []  # the input is about a refund
    selective = RulePack.model_validate(
        {
            "name": "p",
            "version": "1",
            "owner": "o",
            "selector": {"agent": "paper-*"},
            "rules": [PRESENCE],
        }
    )
    assert evaluate_pack(run(llm(1)), selective) == []
    assert len(evaluate_pack(run(llm(1), agent="paper-agent"), selective)) == 1


def test_parallel_steps_do_not_precede_each_other() -> None:
    """An approval running at the same time as the write did not gate it."""
    approval_step = approval(1)
    write = tool(2, "update_account")
    write.start_time_unix_nano = approval_step.start_time_unix_nano  # both started together
    result = verdict(APPROVAL, run(approval_step, write))
    assert (result.verdict, result.evidence) == (Verdict.FAIL, ("s02",))
    parallel = [tool(1, "fetch", {"id": "A"}), tool(2, "fetch", {"id": "B"})]
    parallel[1].start_time_unix_nano = parallel[0].start_time_unix_nano
    any_order = {
        "id": "r",
        "type": "trajectory",
        "reason": "path",
        "order": "any_order",
        "expected": [
            {"name": "fetch", "args": {"id": "B"}},
            {"name": "fetch", "args": {"id": "A"}},
        ],
    }
    assert verdict(any_order, run(*parallel)).verdict == Verdict.PASS
