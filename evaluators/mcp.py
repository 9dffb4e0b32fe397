"""mcp: which MCP servers and tools a run may call (collector/assembler/mcp.py puts each
call's server on its step: the server's own name when its spans are in the trace).

`servers` lists the servers allowed (globs); `tools` the tools allowed, as a list (on any
server) or per server glob. A call whose server the trace does not name cannot be checked
against `servers` (or per-server `tools`): `unknown_server` says whether that is a review (the
default), a violation, or allowed. A call whose client named one server while the server's own
spans name another (`claimed_server` beside `server`) fails whatever the lists allow: the
client did not talk to the server it meant to.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from evaluators.base import Finding, Verdict
from evaluators.matchers import Globs, text_matches
from evaluators.model import Step, Trajectory
from evaluators.rules import RuleBase


class McpRule(RuleBase):
    type: Literal["mcp"]
    servers: Globs = Field(None, description="Servers the run may call (globs).")
    tools: list[str] | dict[str, list[str]] | None = Field(
        None, description="Tools it may call (globs): a list, or server glob -> tool globs."
    )
    unknown_server: Literal["review", "fail", "allow"] = Field(
        "review", description="A call whose server the trace does not name."
    )


def mcp_calls(t: Trajectory) -> list[Step]:
    return [s for s in t.steps if s.is_tool_call and s.mcp is not None]


def needs_server(rule: McpRule) -> bool:
    return rule.servers is not None or isinstance(rule.tools, dict)


def refusal(rule: McpRule, step: Step) -> str | None:
    """Why the rule refuses this call (None when it may be made); `?` when it cannot tell."""
    facts = step.mcp or {}
    server = facts.get("server")
    tool = step.tool_name or step.name
    if facts.get("claimed_server") and server:
        return (
            f"{tool}: the client named server {facts['claimed_server']}, the server's own"
            f" spans name it {server}"
        )
    if isinstance(rule.tools, list) and not text_matches(rule.tools, tool):
        return f"tool {tool} is not allowed"  # on any server: the server need not be known
    if server is None and needs_server(rule):
        return "?"
    if rule.servers is not None and not text_matches(rule.servers, server):
        return f"{tool} on server {server}, which is not allowed"
    if isinstance(rule.tools, dict):
        allowed = [
            g for glob, tools in rule.tools.items() if text_matches(glob, server) for g in tools
        ]
        if not text_matches(allowed, tool):
            return f"tool {tool} is not allowed on server {server}"
    return None


def refused_why(rule: McpRule, step: Step) -> str | None:
    """`refusal`, with a call to a server the trace does not name refused when the rule says
    `unknown_server: fail` (`?` otherwise)."""
    why = refusal(rule, step)
    if why == "?" and rule.unknown_server == "fail":
        return f"{step.tool_name} on a server the trace does not name"
    return why


def mcp_step(t: Trajectory, rule: McpRule, step: Step) -> Finding | None:
    """This call's own verdict under the rule (None when it is no MCP tool call): what the
    runtime guard asks of a proposed call, which an earlier refused call must not hide."""
    if not (step.is_tool_call and step.mcp is not None):
        return None
    why = refused_why(rule, step)
    if why is None or (why == "?" and rule.unknown_server != "review"):
        return Finding(Verdict.PASS, f"{step.tool_name} allowed")
    if why == "?":
        message = f"{step.tool_name} to a server the trace does not name"
        return Finding(Verdict.REVIEW, message, (step.span_id,), reason="mcp_server_unknown")
    return Finding(Verdict.FAIL, why, (step.span_id,))


def evaluate_mcp(t: Trajectory, rule: McpRule) -> Finding:
    calls = mcp_calls(t)
    if not calls:
        return Finding(Verdict.NOT_APPLICABLE, "no MCP tool call")
    refused: list[tuple[Step, str]] = []
    unknown: list[Step] = []
    for step in calls:
        why = refused_why(rule, step)
        if why == "?":
            unknown.append(step)
        elif why is not None:
            refused.append((step, why))
    if refused:
        return Finding(
            Verdict.FAIL, "; ".join(why for _, why in refused), tuple(s.span_id for s, _ in refused)
        )
    if unknown and rule.unknown_server == "review":
        return Finding(
            Verdict.REVIEW,
            f"{len(unknown)} MCP call(s) to a server the trace does not name",
            tuple(s.span_id for s in unknown),
            reason="mcp_server_unknown",
        )
    servers = sorted({str((s.mcp or {}).get("server") or "unnamed") for s in calls})
    return Finding(Verdict.PASS, f"{len(calls)} MCP call(s) allowed ({', '.join(servers)})")
