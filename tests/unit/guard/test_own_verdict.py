"""A rule that judges each step on its own is asked the proposed call's own verdict: an earlier
failure in the run (the verdict's business afterwards) never hides this call's."""

from __future__ import annotations

import json
from typing import Any

from collector.assembler.prices import PriceTable
from collector.guard.call import GuardRequest
from collector.guard.check import judge_call
from evaluators.base import Decision
from evaluators.rulepack import load_text
from tests.support.span_rows import TRACE
from tests.support.span_rows import span_row as row

PACK = """
name: shop
version: "1"
owner: shop-oncall
selector: {service: shop}
rules:
  - id: approved-writes
    type: precedes
    before: {kind: approval, name: request_approval}
    then: {kind: tool, name: "update_*"}
    require_approved: true
    same_subject:
      - {approval_argument: $.customer_id, action_argument: $.customer_id}
    reason: unapproved_write
  - id: credentials-stay-in
    type: flow
    source: {kind: tool, name: get_secret}
    sink: {kind: tool, name: send_email}
    min_length: 8
    reason: secret_exfiltration
  - id: known-servers
    type: mcp
    servers: [catalog]
    unknown_server: review
    reason: mcp_server_not_allowed
"""


def ask(rows: list[dict[str, Any]], tool: dict[str, Any]) -> tuple[str, list[str]]:
    packs = [load_text(PACK, "pack").pack]
    call = GuardRequest.model_validate({"trace_id": TRACE, "service": "shop", "tool": tool})
    got = judge_call(call, rows, packs, (Decision.PASS, []), "f" * 16, 10_000, PriceTable({}))
    return got.answer.value, got.reasons


def write(span_id: str, start: int, customer: str) -> dict[str, Any]:
    return row(
        span_id, "update_account", start, tool_arguments=json.dumps({"customer_id": customer})
    )


def test_an_earlier_unapproved_write_does_not_hide_that_this_ones_approval_is_unreadable():
    approval = row(
        "2" * 16,
        "request_approval",
        200,
        tool_arguments=json.dumps({"ticket": 5}),  # says nothing of the customer
        attributes=json.dumps({"sextant.approval.status": "approved"}),
    )
    update = {"name": "update_account", "arguments": {"customer_id": "C-3"}}
    assert ask([approval], update) == ("review", ["approval_subject_unknown"])
    assert ask([write("1" * 16, 100, "C-2"), approval], update) == (
        "review",
        ["approval_subject_unknown"],
    )


def test_an_earlier_leak_does_not_hide_this_calls_leak():
    def secret(span_id: str, start: int, value: str) -> dict[str, Any]:
        return row(span_id, "get_secret", start, tool_result=json.dumps({"token": value}))

    def email(span_id: str, start: int, body: str) -> dict[str, Any]:
        return row(span_id, "send_email", start, tool_arguments=json.dumps({"body": body}))

    rows = [
        secret("1" * 16, 100, "s3cr3t-AAAA-1111"),
        email("2" * 16, 200, "token s3cr3t-AAAA-1111"),
        secret("3" * 16, 300, "zz-BBBB-2222-q"),
    ]
    leak = {"name": "send_email", "arguments": {"body": "here: zz-BBBB-2222-q"}}
    assert ask(rows, leak) == ("deny", ["secret_exfiltration"])
    clean = {"name": "send_email", "arguments": {"body": "no secrets here"}}
    assert ask(rows, clean) == ("allow", [])


def test_an_earlier_refused_mcp_call_does_not_hide_that_this_ones_server_is_unknown():
    refused = row(
        "1" * 16,
        "search",
        100,
        attributes=json.dumps({"mcp.method.name": "tools/call", "mcp.server.name": "pastebin"}),
    )
    unnamed = {"name": "search", "kind": "mcp"}
    assert ask([refused], unnamed) == ("review", ["mcp_server_unknown"])
    assert ask([refused], {"name": "search", "kind": "mcp", "mcp_server": "catalog"}) == (
        "allow",
        [],
    )
