"""A guard call as it arrives (the proposed tool call and whose run it is) and its answer."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import Field, field_validator

from evaluators.guard import Answer
from evaluators.matchers import Strict

# fullmatch: `$` would also match before a trailing newline
HEX_TRACE = re.compile(r"[0-9a-f]{32}")
HEX_SPAN = re.compile(r"[0-9a-f]{16}")


class ProposedCall(Strict):
    """The tool call the agent is about to make."""

    name: str = Field(min_length=1, max_length=256, description="The tool's name.")
    arguments: dict[str, Any] = Field(
        default_factory=dict, description="The arguments it would be called with."
    )
    kind: Literal["tool", "mcp"] = Field(
        "tool", description="tool, or mcp for a call to an MCP server's tool."
    )
    tool_call_id: str | None = Field(
        None,
        max_length=256,
        description="The id the model gave the call; the model call that asked for it must be"
        " in the run, or the run is partial.",
    )
    mcp_server: str | None = Field(None, max_length=256, description="The MCP server called.")


class GuardRequest(Strict):
    """`POST /v1/guard`: which run, whose, and the call proposed."""

    trace_id: str = Field(description="The run's trace id (32 lowercase hex digits).")
    parent_span_id: str | None = Field(
        None, description="The span the call would run under (the agent's current span)."
    )
    service: str = Field(min_length=1, max_length=256, description="The run's service.name.")
    agent: str | None = Field(None, max_length=256, description="The agent's name.")
    version: str | None = Field(None, max_length=256, description="The run's service.version.")
    conversation_id: str | None = Field(
        None,
        min_length=1,
        max_length=256,
        description="The run's conversation (session) when no span exported so far names it:"
        " the agent's own span, which often carries it, has not ended yet.",
    )
    tool: ProposedCall = Field(description="The proposed call.")

    @field_validator("trace_id", "parent_span_id", mode="before")
    @classmethod
    def _lower(cls, value: Any) -> Any:
        return value.lower() if isinstance(value, str) else value

    @field_validator("trace_id")
    @classmethod
    def _trace(cls, value: str) -> str:
        if not HEX_TRACE.fullmatch(value) or value == "0" * 32:
            raise ValueError("a trace id is 32 hex digits, not all zero")
        return value

    @field_validator("parent_span_id")
    @classmethod
    def _span(cls, value: str | None) -> str | None:
        if value is not None and (not HEX_SPAN.fullmatch(value) or value == "0" * 16):
            raise ValueError("a span id is 16 hex digits, not all zero")
        return value


@dataclass
class GuardAnswer:
    """allow / review / deny, why (reason codes and messages) and the steps that show it.

    `span_id` is the guard's own step in the run: the proposed call as evaluated, recorded as a
    `policy` step whatever the answer."""

    answer: Answer
    reasons: list[str] = field(default_factory=list)
    evidence: list[str] = field(default_factory=list)
    messages: list[str] = field(default_factory=list)
    span_id: str = ""
    decision: str = "PASS"
    parent_span_id: str | None = None  # the span the call (and the guard's step) runs under

    def as_json(self) -> dict[str, Any]:
        return {
            "answer": self.answer.value,
            "reasons": self.reasons,
            "evidence": self.evidence,
            "messages": self.messages,
            "span_id": self.span_id,
            "decision": self.decision,
        }
