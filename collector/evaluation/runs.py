"""What a round counts of each target's runs, for the per-target metrics; it travels back from
the worker process with the round's tally."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from evaluators.model import Trajectory


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
        self.verdicts[verdict] += 1
        self.examples[verdict] = t.trace_id
        self.seconds.append((max(t.duration_ms, 0.0) / 1000, t.trace_id))
        self.input_tokens += t.input_tokens
        self.output_tokens += t.output_tokens
        self.cost_usd += t.cost_usd or 0.0
        errors = sum(1 for s in t.steps if s.is_tool_call and s.status == "error")
        if errors:
            self.tool_errors += errors
            self.examples["tool_error"] = t.trace_id
