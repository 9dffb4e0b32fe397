"""The guard wired to the pipeline's stages: the assembler's runs so far, the writer's journal,
the packs in force, the decision engine's snapshot, the session stage's conversations, ingest
for its steps."""

from __future__ import annotations

from typing import TYPE_CHECKING

from collector.assembler.prices import PriceTable
from collector.guard.conversation import Conversations
from collector.guard.in_flight import TurnsInFlight
from collector.guard.metrics import GuardMetrics
from collector.guard.native_judge import NativeJudge
from collector.guard.record import RECORDED, GuardRecorder
from collector.guard.service import GROWN_RUNS, Guard
from collector.store.pending import fan_out

if TYPE_CHECKING:
    from collector.pipeline import Pipeline


def guard_for(pipeline: Pipeline) -> Guard:
    """A guard over the pipeline's stages; ingest tells it of every acknowledged batch."""
    config = pipeline.config
    metrics = GuardMetrics(pipeline.registry)
    ingest = pipeline.ingest

    async def consume(body: bytes) -> object:
        return await ingest.consume("traces", "json", body, RECORDED)

    recorder = GuardRecorder(
        consume, config.guard.record_linger_seconds, config.guard.max_unrecorded, metrics
    )
    decisions = pipeline.decisions
    # a run of a conversation is closed by the assembler at the latest this long after its
    # last span, and made into its session within a few of the stage's ticks
    sessions = config.sessions
    horizon = config.assembler.max_trace_age_seconds + 10 * sessions.tick_seconds
    in_flight = TurnsInFlight(sessions.across_services, horizon, pipeline.clock, sessions.attribute)
    pipeline.writer.on_commit = fan_out(
        *filter(None, [pipeline.writer.on_commit, in_flight.closed])
    )
    pipeline.sessions.held.keep(sessions.guard_cached)
    prices = PriceTable.load({k: v.model_dump() for k, v in config.pricing.models.items()})
    native = None
    if config.guard.native:
        native = NativeJudge(prices, GROWN_RUNS, config.assembler.max_spans_per_trace)
        # what the native side was told of the packs and decisions is forgotten as they change
        pipeline.packs.on_publish.append(native.runs.packs_changed)
        decisions.on_publish.append(native.runs.decisions_changed)
    guard = Guard(
        config.guard,
        pipeline.assembler,
        pipeline.writer,
        pipeline.packs,
        lambda target: decisions.snapshot().decision_of(target),
        recorder,
        metrics,
        prices,
        pipeline.clock,
        Conversations(sessions, pipeline.sessions, pipeline.database, in_flight),
        native,
    )
    ingest.on_acknowledged = guard.acknowledged
    return guard
