"""An assembly round from when its traces are taken until they are stored, and what a stored
round counts: the assembler (collector/assembler/assembler.py) builds the next round while the
one before it commits, so a round's state outlives the call that built it."""

from __future__ import annotations

import concurrent.futures
from dataclasses import dataclass, field
from typing import Any, Protocol

from collector.assembler.buffers import OpenTrace
from collector.assembler.metrics import AssemblerMetrics
from collector.assembler.work import Built, Evaluates


class EvaluationStage(Protocol):
    """Where each round's evaluator comes from and where what it tallied goes."""

    def evaluator(self) -> Evaluates: ...

    def record(self, evaluated: Any) -> None: ...


@dataclass
class Round:
    """The traces of one assembly round, from when they were taken until they are stored."""

    due: list[tuple[OpenTrace, str]]
    since: float  # monotonic: its traces were due then
    started: float  # perf_counter, for its duration and pace
    full: bool  # it took as many traces as a round may: more are likely due
    spans: int = 0
    trace_ids: set[str] = field(default_factory=set)
    builds: list[Built] = field(default_factory=list)
    stored: concurrent.futures.Future[None] | None = None  # its commit

    def __post_init__(self) -> None:
        self.spans = sum(trace.spans for trace, _ in self.due)
        self.trace_ids = {trace.trace_id for trace, _ in self.due}


def count_stored(
    built: Built,
    last_seen: dict[str, float],
    now: float,
    metrics: AssemblerMetrics,
    evaluation: EvaluationStage | None,
) -> None:
    """A stored batch in the metrics (`now`, monotonic, against each trace's last span), and its
    evaluator's tally handed on."""
    for trace_id, reason, revision, late in built.closed:
        metrics.closed.labels(reason).inc()
        metrics.latency.observe(max(0.0, now - last_seen[trace_id]))
        if revision > 1:
            metrics.reopened.inc()
            metrics.late_spans.inc(late)
    metrics.count_native(built.native, built.fallback)
    for kind, count in built.step_kinds.items():
        metrics.steps.labels(kind).inc(count)
    if evaluation is not None and built.evaluator is not None:
        evaluation.record(built.evaluator)
