"""The guard's judgement as a pure function: the target's decision, rules that count against
the proposed call only when it is part of the finding, and runs it cannot see."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from collector.assembler.build import build_trajectory
from collector.assembler.prices import PriceTable
from collector.guard import wire
from collector.guard.call import GuardRequest
from collector.guard.check import decision_verdict, guard_rules, judge_call
from evaluators.base import Decision
from evaluators.guard import Answer, GuardSettings
from evaluators.rulepack import load_text
from tests.support.span_rows import ROOT, TRACE
from tests.support.span_rows import span_row as row

PRICES = PriceTable({})
WRITES = GuardSettings(writes=["update_*"])


@pytest.mark.parametrize(
    ("decision", "tool", "settings", "expected"),
    [
        (Decision.PASS, "update_account", [WRITES], None),
        (Decision.FAIL, "update_account", [WRITES], None),
        (Decision.REVIEW, "update_account", [WRITES], None),
        (Decision.DISABLE, "lookup_customer", [WRITES], (Answer.DENY, "target_disabled")),
        (Decision.DISABLE, "lookup_customer", [], (Answer.DENY, "target_disabled")),
        (Decision.DOWNGRADE, "update_account", [WRITES], (Answer.DENY, "target_downgraded")),
        (Decision.DOWNGRADE, "lookup_customer", [WRITES], None),
        (
            Decision.DOWNGRADE,
            "lookup_customer",
            [GuardSettings()],
            (Answer.REVIEW, "target_downgraded_writes_unknown"),
        ),
        (Decision.QUARANTINE, "update_account", [WRITES], (Answer.DENY, "target_quarantine")),
        (Decision.QUARANTINE, "lookup_customer", [WRITES], None),
        (
            Decision.QUARANTINE,
            "lookup_customer",
            [GuardSettings(quarantine="review")],
            (Answer.REVIEW, "target_quarantine"),
        ),
        (Decision.QUARANTINE, "update_account", [GuardSettings(quarantine="allow")], None),
        (Decision.ROLLBACK, "update_account", [WRITES], (Answer.DENY, "target_rollback")),
    ],
)
def test_the_targets_decision_answers_as_the_packs_say(
    decision: Decision, tool: str, settings: list[GuardSettings], expected: Any
) -> None:
    found = decision_verdict(decision, [], tool, settings)
    assert (None if found is None else (found.answer, found.reason)) == expected


BUDGET_PACK = """
name: shop
version: "1"
owner: shop-oncall
selector: {service: shop}
rules:
  - id: three-tools
    type: budget
    max_tool_calls: 3
    reason: over_budget
"""


def request(tool: str = "search") -> GuardRequest:
    return GuardRequest.model_validate(
        {"trace_id": TRACE, "service": "shop", "tool": {"name": tool, "arguments": {}}}
    )


def judged(rows: list[dict[str, Any]], pack: str = BUDGET_PACK) -> tuple[str, list[str]]:
    packs = [load_text(pack, "pack").pack]
    got = judge_call(request(), rows, packs, (Decision.PASS, []), "f" * 16, 10_000, PRICES)
    return got.answer.value, got.reasons


def test_a_call_that_would_go_over_budget_is_denied() -> None:
    rows = [row(f"{i:016x}", "search", 100 * i) for i in range(1, 3)]
    assert judged(rows) == ("allow", [])
    rows.append(row(f"{3:016x}", "search", 300))
    assert judged(rows) == ("deny", ["over_budget"])


def test_a_run_over_budget_before_the_call_is_not_the_calls_doing() -> None:
    """The verdict afterwards fails the run; refusing this call would not undo it."""
    rows = [row(f"{i:016x}", "search", 100 * i) for i in range(1, 5)]
    assert judged(rows) == ("allow", [])


def test_an_unknown_run_is_the_packs_on_unknown() -> None:
    assert judged([]) == ("review", ["guard_run_unknown"])
    lenient = BUDGET_PACK.replace("selector:", "guard: {on_unknown: allow}\nselector:")
    assert judged([], lenient) == ("allow", ["guard_run_unknown"])


def test_the_proto_file_and_the_served_messages_agree_field_by_field() -> None:
    text = re.sub(r"//.*", "", (Path(wire.__file__).parent / "guard.proto").read_text())
    for message, fields in wire.FIELDS.items():
        body = re.search(rf"message {message} {{(.*?)}}", text, re.S)
        assert body is not None, message
        declared = re.findall(r"(repeated )?(\w+) (\w+) = (\d+);", body.group(1))
        assert [(f, int(n), bool(r)) for r, _, f, n in declared] == [
            (f, n, rep) for f, n, rep, _ in fields
        ]
    assert "rpc Check(CheckRequest) returns (CheckResponse);" in text
    sent = wire.CheckRequest(trace_id=TRACE, service="shop", tool=wire.ProposedCall(name="x"))
    parsed = wire.request_of(sent.SerializeToString())
    assert (parsed.trace_id, parsed.tool.name, parsed.tool.arguments) == (TRACE, "x", {})
    assert json.loads(json.dumps(parsed.model_dump()))["tool"]["kind"] == "tool"


def test_a_tool_span_holding_the_guards_refusal_is_no_tool_call() -> None:
    """Frameworks ask inside the tool's span and answer the model with the refusal: the span
    is a guardrail step; a refusal asked outside the span leaves the call as it is."""
    refusal = {
        "sextant.policy.decision": "deny",
        "sextant.policy.name": "sextant.guard",
        "sextant.guard.tool": "update_account",
    }

    def guard_row(span_id: str, parent: str) -> dict[str, Any]:
        attributes = json.dumps(refusal)
        return row(
            span_id,
            "guard update_account",
            60,
            parent_span_id=parent,
            step_kind="other",
            tool_name=None,
            attributes=attributes,
        )

    inside = [row("a" * 16, "update_account", 50), guard_row("b" * 16, "a" * 16)]
    t = build_trajectory(TRACE, inside, PRICES)
    assert [(s.kind, s.is_tool_call) for s in t.steps] == [("guardrail", False), ("policy", False)]
    beside = [row("a" * 16, "update_account", 50), guard_row("b" * 16, ROOT)]
    t = build_trajectory(TRACE, beside, PRICES)
    assert [(s.kind, s.is_tool_call) for s in t.steps] == [("tool", True), ("policy", False)]


MCP_PACK = """
name: shop
version: "1"
owner: shop-oncall
selector: {service: shop}
rules:
  - id: known-servers
    type: mcp
    servers: [catalog]
    reason: mcp_server_not_allowed
"""


@pytest.mark.parametrize(("server", "expected"), [("catalog", "allow"), ("pastebin", "deny")])
def test_an_mcp_call_is_judged_by_the_allow_list(server: str, expected: str) -> None:
    call = GuardRequest.model_validate(
        {
            "trace_id": TRACE,
            "service": "shop",
            "tool": {"name": "search", "kind": "mcp", "mcp_server": server},
        }
    )
    packs = [load_text(MCP_PACK, "pack").pack]
    rows = [row("a" * 16, "lookup", 10)]
    got = judge_call(call, rows, packs, (Decision.PASS, []), "f" * 16, 1000, PRICES)
    assert got.answer.value == expected
    assert got.reasons == ([] if expected == "allow" else ["mcp_server_not_allowed"])


def test_a_pack_that_cannot_tell_whether_it_selects_the_run_reviews_the_call() -> None:
    """Its selector reads the root span, which an open run has not exported yet."""
    on_root = BUDGET_PACK.replace(
        "selector: {service: shop}", "selector: {service: shop, attributes: {tier: gold}}"
    )
    rows = [row(f"{i:016x}", "search", 100 * i) for i in range(1, 3)]
    assert judged(rows, on_root) == ("review", ["trace_incomplete"])


def test_a_run_of_no_conversation_is_asked_no_session_rule_and_a_new_pack_has_its_own() -> None:
    """A session's budget needs the session's other runs: a run that names no conversation
    has none (tests/unit/guard/test_session_rules.py asks them of one that does); the pack's
    run rules are listed once per compiled version, and a new version is read anew."""
    session = BUDGET_PACK.replace("max_tool_calls: 3", "max_tool_calls: 1\n    scope: session")
    rows = [row(f"{i:016x}", "search", 100 * i) for i in range(1, 3)]
    assert judged(rows, session) == ("allow", [])
    first = load_text(BUDGET_PACK, "pack").pack
    assert guard_rules(first) == guard_rules(first) == list(first.rules)
    lower = load_text(BUDGET_PACK.replace("max_tool_calls: 3", "max_tool_calls: 2"), "pack").pack
    assert [r.max_tool_calls for r in guard_rules(lower)] == [2]
