"""The trajectory model every evaluator reads: an agent run as ordered steps plus totals."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from enum import Enum
from typing import Any

import orjson

from evaluators.results import parse_result


class Unparsed(Enum):
    """Marks a result not parsed yet; an enum member stays itself through pickling."""

    TOKEN = 0


UNPARSED: Any = Unparsed.TOKEN
# How far a step may seem to start before another ended and still count as after it: spans of
# one run come from clocks that disagree by a little.
CLOCK_SLACK_NS = 1_000_000

STEP_KINDS = (
    "agent",
    "llm",
    "tool",
    "retrieval",
    "embedding",
    "guardrail",
    "handoff",
    "approval",
    "policy",
    "state_change",
    "other",
)


@dataclass(slots=True)
class Step:
    """One span of the run, in causal order (depth-first over the span tree, siblings by start)."""

    seq: int
    span_id: str
    parent_span_id: str | None
    depth: int
    kind: str
    span_kind: str  # the kind normalization gave the span, before sextant.* refinements
    name: str
    status: str  # ok | error
    start_time_unix_nano: int
    end_time_unix_nano: int
    agent_name: str | None = None
    tool_name: str | None = None
    tool_call_id: str | None = None
    arguments: Any = None
    result: str | None = None
    error_type: str | None = None
    model: str | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    cost_usd: float | None = None
    approval_status: str | None = None
    policy_name: str | None = None
    policy_decision: str | None = None
    state_target: str | None = None
    # An MCP call's or request's facts: method, server, session_id, protocol_version,
    # request_id, and for `tools/list` the tools listed (collector/assembler/mcp.py).
    mcp: dict[str, Any] | None = None
    # The span id of the model call whose output asked for this tool call (matched by tool-call
    # id); None when the instrumentation does not say which one did.
    requested_by: str | None = None
    attributes_json: str | None = field(default=None, repr=False)
    _attributes: dict[str, Any] | None = field(default=None, repr=False, compare=False)
    _result_value: Any = field(default=UNPARSED, repr=False, compare=False)

    @property
    def attributes(self) -> dict[str, Any]:
        """The span's attributes, decoded on first use (most rules never need them)."""
        if self._attributes is None:
            self._attributes = orjson.loads(self.attributes_json) if self.attributes_json else {}
        return self._attributes

    @property
    def result_value(self) -> Any:
        """The tool's result as one parsed value whatever the instrumentation (envelopes
        removed, JSON inside strings decoded; see `evaluators/results.py`). The assembler
        computes it when it builds the step; a step read back from the store parses on first use."""
        if self._result_value is UNPARSED:
            self._result_value = parse_result(self.result)
        return self._result_value

    @property
    def duration_ms(self) -> float:
        return (self.end_time_unix_nano - self.start_time_unix_nano) / 1e6

    @property
    def is_tool_call(self) -> bool:
        return self.span_kind == "tool"


@dataclass(slots=True)
class Trajectory:
    """A trace seen as an agent run; `revision` grows each time late spans rebuild it."""

    trace_id: str
    revision: int
    status: str  # ok | error | incomplete
    close_reason: str  # complete | incomplete_timeout | incomplete_bound
    agent_run: bool
    service_name: str | None
    agent_name: str | None
    service_version: str | None
    steps: list[Step] = field(default_factory=list)
    root_span_id: str | None = None
    root_name: str | None = None
    case_id: str | None = None
    conversation_id: str | None = None
    user_id: str | None = None
    input: str | None = None
    final_output: str | None = None
    incomplete_reasons: list[str] = field(default_factory=list)
    start_time_unix_nano: int = 0
    end_time_unix_nano: int = 0
    span_count: int = 0
    late_spans: int = 0

    @property
    def tool_calls(self) -> int:
        return sum(1 for s in self.steps if s.is_tool_call)

    @property
    def llm_calls(self) -> int:
        return sum(1 for s in self.steps if s.kind == "llm")

    @property
    def input_tokens(self) -> int:
        return sum(s.input_tokens or 0 for s in self.steps if s.kind == "llm")

    @property
    def output_tokens(self) -> int:
        return sum(s.output_tokens or 0 for s in self.steps if s.kind == "llm")

    @property
    def cost_usd(self) -> float | None:
        """The sum over model calls; None when no model call has a known price."""
        costs = [s.cost_usd for s in self.steps if s.kind == "llm" and s.cost_usd is not None]
        return sum(costs) if costs else None

    @property
    def unpriced_llm_calls(self) -> int:
        return sum(1 for s in self.steps if s.kind == "llm" and s.cost_usd is None)

    @property
    def error_count(self) -> int:
        return sum(1 for s in self.steps if s.status == "error")

    @property
    def duration_ms(self) -> float:
        return (self.end_time_unix_nano - self.start_time_unix_nano) / 1e6

    @property
    def target(self) -> tuple[str | None, str | None, str | None]:
        """What decisions are about: service.name × agent name × service.version."""
        return (self.service_name, self.agent_name, self.service_version)

    def totals(self) -> dict[str, Any]:
        return {
            "steps": len(self.steps),
            "tool_calls": self.tool_calls,
            "llm_calls": self.llm_calls,
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "cost_usd": self.cost_usd,
            "unpriced_llm_calls": self.unpriced_llm_calls,
            "error_count": self.error_count,
            "duration_ms": self.duration_ms,
        }

    @property
    def root(self) -> Step | None:
        if self.root_span_id is None:  # a run in progress: its root has not ended
            return None
        return next((s for s in self.steps if s.span_id == self.root_span_id), None)

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["totals"] = self.totals()
        for step, data in zip(self.steps, out["steps"], strict=True):
            data["duration_ms"] = step.duration_ms
            del data["_attributes"]
            del data["_result_value"]
        return out
