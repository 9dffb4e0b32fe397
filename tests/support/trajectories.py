"""Hand-built trajectories for evaluator tests: a run of steps, tool and LLM steps."""

from __future__ import annotations

import json
from typing import Any

from evaluators.model import Step, Trajectory


def step(
    seq: int,
    kind: str,
    name: str,
    *,
    status: str = "ok",
    args: Any = None,
    result: str | None = None,
    attrs: dict | None = None,
    agent: str = "support-agent",
    span_kind: str | None = None,
    depth: int = 1,
    **extra: Any,
) -> Step:
    return Step(
        seq=seq,
        span_id=f"s{seq:02d}",
        parent_span_id="s00" if depth else None,
        depth=depth,
        kind=kind,
        span_kind=span_kind or kind,
        name=name,
        status=status,
        start_time_unix_nano=1_000_000_000 * (seq + 1),
        end_time_unix_nano=1_000_000_000 * (seq + 1) + 500_000_000,
        agent_name=agent,
        tool_name=name if (span_kind or kind) == "tool" else None,
        arguments=args,
        result=result,
        attributes_json=json.dumps(attrs or {}),
        **extra,
    )


def run(
    *steps: Step,
    status: str = "ok",
    final: str | None = "Done.",
    agent: str = "support-agent",
    root_attrs: dict | None = None,
    reasons: list[str] | None = None,
) -> Trajectory:
    root = step(0, "agent", agent, depth=0, attrs=root_attrs, agent=agent)
    return Trajectory(
        trace_id="ab" * 16,
        revision=1,
        status=status,
        close_reason="complete",
        agent_run=True,
        service_name="support",
        agent_name=agent,
        service_version="1.0",
        steps=[root, *steps],
        root_span_id="s00",
        final_output=final,
        input="Refund order 77",
        incomplete_reasons=reasons or [],
        start_time_unix_nano=1_000_000_000,
        end_time_unix_nano=60_000_000_000,
    )


def tool(seq: int, name: str, args: Any = None, **kw: Any) -> Step:
    return step(seq, "tool", name, args=args if args is not None else {}, **kw)


def llm(seq: int, **kw: Any) -> Step:
    return step(seq, "llm", "gpt-4.1-mini", input_tokens=100, output_tokens=10, **kw)
