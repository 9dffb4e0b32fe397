"""recovery: an error is retried or handled; a run never ends in a silent failure."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from evaluators.base import Finding, Verdict
from evaluators.model import Trajectory
from evaluators.rules import RuleBase


class RecoveryRule(RuleBase):
    type: Literal["recovery"]
    require_retry: bool = Field(
        True,
        description="A failed tool call needs a later successful call of the same tool,"
        " unless the run ends with an answer (handled termination).",
    )


def evaluate_recovery(t: Trajectory, rule: RecoveryRule) -> Finding:
    tools = [s for s in t.steps if s.is_tool_call]
    problems: list[str] = []
    evidence: list[str] = []
    if tools and tools[-1].status == "error" and t.steps[-1] is tools[-1]:
        problems.append(f"the run ends with the failed call {tools[-1].name}")
        evidence.append(tools[-1].span_id)
    if t.status == "error" and not t.final_output:
        problems.append("the run failed without telling the user")
        if t.root_span_id:
            evidence.append(t.root_span_id)
    if rule.require_retry:
        for failed in (s for s in tools if s.status == "error"):
            retried = any(
                later.tool_name == failed.tool_name and later.status == "ok"
                for later in tools
                if later.seq > failed.seq
            )
            if not retried and not t.final_output:
                problems.append(f"{failed.name} (seq {failed.seq}) failed and was not retried")
                evidence.append(failed.span_id)
    errors = sum(1 for s in tools if s.status == "error")
    if problems:
        return Finding(Verdict.FAIL, "; ".join(problems), tuple(dict.fromkeys(evidence)))
    if errors:
        return Finding(Verdict.PASS, f"{errors} failed tool call(s), all recovered")
    return Finding(Verdict.PASS, "no failed tool calls")
