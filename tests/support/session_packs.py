"""Packs of session rules the guard asks, for one service: a conversation's tool-call budget
(and turns), and an approval that covers writes to its customer for two turns and ten minutes."""

from __future__ import annotations


def session_budget(service: str) -> str:
    """At most 4 tool calls and 3 turns a conversation: `session_over_budget`."""
    return f"""
name: {service}-budget
version: "1"
owner: {service}-oncall
selector: {{service: {service}}}
rules:
  - id: session-budget
    type: budget
    scope: session
    max_tool_calls: 4
    max_turns: 3
    reason: session_over_budget
"""


def approval_lifetime(service: str) -> str:
    """An approval (`request_approval`) covers `update_*` of its `$.customer` in its own turn
    and the next, for 10 minutes: `stale_approval`."""
    return f"""
name: {service}-approvals
version: "1"
owner: {service}-oncall
selector: {{service: {service}}}
approvals: {{tools: [request_approval]}}
rules:
  - id: fresh-approval
    type: approval_lifetime
    writes: {{kind: tool, name: "update_*"}}
    max_turns: 2
    max_age: 10m
    same_resource: ["$.customer"]
    reason: stale_approval
"""
