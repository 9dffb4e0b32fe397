"""Approvals read from what approval tools return; result conditions; a denied approval never
satisfies precedes; packs with a bad result path or recogniser are refused at file:line: field."""

from __future__ import annotations

import fnmatch
import json
from pathlib import Path

import pytest

from collector.config.sections import BUILTIN_RULES
from evaluators.approvals import Approvals
from evaluators.base import Verdict
from evaluators.evaluate import evaluate_pack
from evaluators.rulepack import RulePackError, load_pack, load_text
from tests.support.rules import verdict
from tests.support.trajectories import llm, run, tool

SUPPORT = load_pack(BUILTIN_RULES / "support-agent.yaml").pack
GATE = {
    "id": "gate",
    "type": "precedes",
    "reason": "approval_boundary_violation",
    "before": {"kind": "approval"},
    "then": {"kind": "tool", "name": "update_*"},
}


def asked(seq: int, result: object, name: str = "request_approval", **kw):  # type: ignore[no-untyped-def]
    text = result if isinstance(result, str) else json.dumps(result)
    return tool(seq, name, {"change": "email", "customer_id": "C-1"}, result=text, **kw)


def write(seq: int, **kw):  # type: ignore[no-untyped-def]
    return tool(seq, "update_account", {"customer_id": "C-1"}, **kw)


@pytest.mark.parametrize(
    ("result", "status"),
    [
        ({"approved": True}, "approved"),
        ({"approved": False, "reason": "over limit"}, "denied"),
        ({"status": "approved"}, "approved"),
        ({"status": "Denied"}, "denied"),
        ({"status": "rejected"}, "denied"),
        ({"status": "pending"}, "pending"),
        ({"decision": "approve"}, "approved"),
        ({"decision": "reject"}, "denied"),
        ("approved", "approved"),
        ("denied", "denied"),
        ({"approved": "yes"}, None),  # not a recognised value: unknown, not approved
        ({"ticket": "APR-1"}, None),
    ],
)
def test_the_default_recogniser(result: object, status: str | None) -> None:
    assert Approvals().recognise(asked(1, result)) == (True, status)


def test_the_span_attribute_overrides_the_result() -> None:
    step = asked(1, {"approved": True}, attrs={"sextant.approval.status": "denied"})
    assert Approvals().recognise(step) == (True, "denied")


def test_a_pack_recogniser_names_its_tools_and_values() -> None:
    approvals = Approvals.model_validate(
        {
            "tools": ["ask_*"],
            "results": [{"path": "$.verdict.outcome", "approved": ["OK"], "denied": ["NO"]}],
            "defaults": False,
        }
    )
    assert approvals.recognise(asked(1, {"verdict": {"outcome": "ok"}}, "ask_manager")) == (
        True,
        "approved",
    )
    assert approvals.recognise(asked(1, {"approved": True}, "ask_manager")) == (True, None)
    assert approvals.recognise(asked(1, {"approved": True}, "request_approval")) == (False, None)


@pytest.mark.parametrize(
    ("approval", "expected"),
    [
        ({"approved": True}, Verdict.PASS),
        ({"approved": False}, Verdict.FAIL),
        ({"decision": "reject"}, Verdict.FAIL),
    ],
)
def test_a_denied_approval_never_satisfies_precedes(approval: dict, expected: Verdict) -> None:
    # `before` says only "an approval"; a denied one still does not count.
    result = verdict(GATE, run(asked(1, approval), write(2)))
    assert result.verdict == expected
    if expected == Verdict.FAIL:
        assert result.evidence == ("s02",)


def test_require_approved_refuses_pending_and_unrecognised_approvals() -> None:
    rule = {**GATE, "require_approved": True}
    assert verdict(rule, run(asked(1, {"status": "pending"}), write(2))).verdict == Verdict.FAIL
    assert verdict(rule, run(asked(1, "I'll ask my manager"), write(2))).verdict == Verdict.FAIL
    assert verdict(GATE, run(asked(1, "I'll ask my manager"), write(2))).verdict == Verdict.PASS


def test_result_conditions_read_the_parsed_result() -> None:
    rule = {
        "id": "big",
        "type": "absence",
        "reason": "big_refund",
        "step": {"name": "issue_refund", "result": {"$.refund.amount": {"gt": 100}}},
    }
    envelope = json.dumps({"type": "tool", "data": {"content": '{"refund": {"amount": 120}}'}})
    big = tool(1, "issue_refund", {}, result=envelope)
    small = tool(1, "issue_refund", {}, result='{"refund": {"amount": 20}}')
    assert verdict(rule, run(big)).verdict == Verdict.FAIL
    assert verdict(rule, run(small)).verdict == Verdict.PASS
    whole = {**rule, "step": {"name": "issue_refund", "result": {"$": {"regex": "refused"}}}}
    assert verdict(whole, run(tool(1, "issue_refund", {}, result="refused"))).verdict == (
        Verdict.FAIL
    )
    assert verdict(whole, run(tool(1, "issue_refund", {}))).verdict == Verdict.PASS  # no result


def support(*steps, root_attrs: dict | None = None) -> dict[str, tuple[str, tuple]]:  # type: ignore[no-untyped-def]
    results = evaluate_pack(run(*steps, root_attrs=root_attrs), SUPPORT)
    return {r.rule_id: (r.verdict.value, r.evidence) for r in results}


def test_the_shipped_support_pack_on_results_alone() -> None:
    # each call asked for by the model call before it (its call id in that call's output)
    approved = support(
        llm(1),
        tool(2, "lookup_customer", requested_by="s01"),
        llm(3),
        asked(4, {"approved": True}, requested_by="s03"),
        llm(5),
        write(6, requested_by="s05"),
    )
    assert {v for v, _ in approved.values()} == {"pass", "not_applicable"}
    assert approved["acts-as-the-requesting-user"][0] == "pass"  # no enduser.id anywhere
    missing = support(tool(1, "lookup_customer"), write(2))
    assert missing["approval-before-account-change"] == ("fail", ("s02",))
    denied = support(asked(1, {"approved": False}), write(2))
    assert denied["approval-before-account-change"] == ("fail", ("s02",))
    rule = next(r for r in SUPPORT.rules if r.id == "approval-before-account-change")
    assert rule.on_fail.value == "QUARANTINE"


HEAD = "name: p\nversion: '1'\nowner: me\n"


def errors(text: str) -> list[str]:
    with pytest.raises(RulePackError) as exc:
        load_text(HEAD + text, "p.yaml")
    return exc.value.errors


def test_a_bad_result_path_is_refused_with_file_line_and_field() -> None:
    [error] = errors(
        "rules:\n"
        "  - id: r\n"
        "    type: presence\n"
        "    reason: r\n"
        "    step:\n"
        "      name: request_approval\n"
        "      result: {'$.decision[x]': approved}\n"
    )
    assert error.startswith("p.yaml:10: rules[0](id=r).step.result: Value error, invalid JSON path")


def test_a_bad_recogniser_is_refused_with_file_line_and_field() -> None:
    found = errors(
        "approvals:\n"
        "  tools: []\n"
        "  results:\n"
        "    - {path: '$.ok..x', approved: [true]}\n"
        "    - {path: '$.status'}\n"
        "  colour: red\n"
        "rules:\n"
        "  - {id: r, type: presence, reason: r, step: {name: x}}\n"
    )
    assert found == [
        "p.yaml:5: approvals.tools: Value error, list at least one tool name or glob,"
        " e.g. [request_approval]",
        "p.yaml:7: approvals.results[0].path: Value error, invalid JSON path '$.ok..x': write"
        " keys with dots and list indexes in brackets, e.g. $.decision.status or $.items[0].id"
        " ($ alone is the whole value)",
        "p.yaml:8: approvals.results[1]: Value error, approval shape '$.status' needs"
        " `approved` or `denied` values",
        "p.yaml:9: approvals.colour: unknown key (check the spelling; see the rule type's fields"
        " in docs/rules.md)",
    ]


def test_rules_validate_reports_them(tmp_path: Path) -> None:
    import subprocess
    import sys

    bad = tmp_path / "bad.yaml"
    bad.write_text(
        HEAD + "approvals: {tools: [ask], results: [{path: '$[', denied: [no]}]}\n"
        "rules:\n  - {id: r, type: presence, reason: r, step: {result: {'a b': 1}}}\n"
    )
    out = subprocess.run(
        [sys.executable, "-m", "collector.cli", "rules", "validate", str(bad)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode != 0
    assert f"{bad}:4: approvals.results[0].path: Value error, invalid JSON path" in out.stderr
    assert f"{bad}:6: rules[0](id=r).step.result: Value error, invalid JSON path" in out.stderr


def test_approval_tools_match_as_any_of_their_globs_would() -> None:
    globs = ["request_approval", "*approv*", "a?c", "[xy]z", "[!q]*_ok", "Mixed*Case"]
    approvals = Approvals(tools=globs)
    names = ["request_approval", "REQUEST_APPROVAL", "my_Approval_x", "abc", "axbc", "xz", "zz"]
    names += ["q_ok", "r_ok", "mixed_case", "", "request_approval\n", "a\nc", "[xy]z", "approv"]
    for name in names:
        expected = any(fnmatch.fnmatchcase(name.lower(), g.lower()) for g in globs)
        assert approvals.is_approval_tool(name) == expected, name
    assert not approvals.is_approval_tool(None)
