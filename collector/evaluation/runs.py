"""What a round counts of each target's runs, for the per-target metrics; it travels back from
the worker process with the round's tally."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from evaluators.model import Trajectory


@dataclass(frozen=True)
class RunFacts:
    """What the round's tally reads of a run: from its trajectory, or from its row of the
    `trajectories` table when the round was built natively (no trajectory object)."""

    trace_id: str
    revision: int
    agent_run: bool
    service_name: str | None
    agent_name: str | None
    service_version: str | None
    duration_ms: float
    input_tokens: int
    output_tokens: int
    cost_usd: float | None
    tool_errors: int

    @classmethod
    def of(cls, t: Trajectory) -> RunFacts:
        return cls(
            t.trace_id,
            t.revision,
            t.agent_run,
            t.service_name,
            t.agent_name,
            t.service_version,
            t.duration_ms,
            t.input_tokens,
            t.output_tokens,
            t.cost_usd,
            sum(1 for s in t.steps if s.is_tool_call and s.status == "error"),
        )


@dataclass
class Runs:
    """One target's runs in a round: what the per-target metrics count."""

    verdicts: Counter[str] = field(default_factory=Counter)
    seconds: list[tuple[float, str]] = field(default_factory=list)  # (duration, trace id)
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    tool_errors: int = 0
    examples: dict[str, str] = field(default_factory=dict)  # verdict or "tool_error" -> trace

    def count(self, t: Trajectory, verdict: str) -> None:
        self.count_facts(RunFacts.of(t), verdict)

    def count_facts(self, t: RunFacts, verdict: str) -> None:
        self.verdicts[verdict] += 1
        self.examples[verdict] = t.trace_id
        self.seconds.append((max(t.duration_ms, 0.0) / 1000, t.trace_id))
        self.input_tokens += t.input_tokens
        self.output_tokens += t.output_tokens
        self.cost_usd += t.cost_usd or 0.0
        if t.tool_errors:
            self.tool_errors += t.tool_errors
            self.examples["tool_error"] = t.trace_id
