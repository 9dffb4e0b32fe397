"""The sections of SextantConfig for the stages beside the run flow: window rules, judges,
sessions and evaluation events out."""

from __future__ import annotations

from typing import Literal, get_args

from pydantic import Field

from collector.config.sections import Seconds, Strict


class DriftConfig(Strict):
    enabled: bool = Field(True, description="Evaluate drift and reliability rules on schedule.")
    tick_seconds: Seconds = Field(
        1.0, gt=0, description="How often due window rules are looked for (each has `interval`)."
    )
    max_evidence: int = Field(
        10, ge=0, le=1000, description="Evidence trace ids kept per window result."
    )


class JudgesConfig(Strict):
    enabled: bool = Field(True, description="Run the packs' `judge` rules beside the pipeline.")
    tick_seconds: Seconds = Field(1.0, gt=0, description="How often new runs are looked for.")
    batch: int = Field(200, ge=1, description="Most runs taken per look.")
    lookback_seconds: Seconds = Field(
        3600.0,
        gt=0,
        description="At start, and for a pack added or renamed while running (reload), runs"
        " closed this recently and not judged are judged.",
    )
    cache_entries: int = Field(
        10_000, ge=0, description="Judgements kept by prompt hash (a repeat costs nothing)."
    )


class SessionsConfig(Strict):
    enabled: bool = Field(True, description="Group runs into sessions and run session rules.")
    attribute: str | None = Field(
        None,
        description="Span attribute holding the session id, before the conventions'"
        " (gen_ai.conversation.id, session.id, traceloop.association.properties.*).",
    )
    across_services: bool = Field(
        False,
        description="Group one conversation id across services into one session (default: a"
        " session is one service's conversation; two services that reuse an id stay apart).",
    )
    idle_seconds: Seconds = Field(
        1800.0, gt=0, description="A session with no new turn for this long is closed."
    )
    max_turns: int = Field(
        500, ge=1, description="Turns a session rule reads; a longer session is reviewed."
    )
    tick_seconds: Seconds = Field(
        1.0, gt=0, description="How often idle sessions are looked for (closed runs wake it)."
    )
    lookback_seconds: Seconds = Field(
        86400.0, gt=0, description="At start, runs closed this recently are grouped again."
    )
    max_queue: int = Field(
        10_000,
        ge=1,
        description="Closed runs waiting for the stage; past it they are read again from the"
        " store (sextant_sessions_queue_dropped_runs_total).",
    )
    max_cached: int = Field(
        10_000,
        ge=0,
        description="Open sessions kept in memory; another is read from its stored row when a"
        " turn arrives.",
    )
    guard_cached: int = Field(
        1_024,
        ge=0,
        description="Sessions whose turns are kept in memory for the runtime guard's session"
        " rules, the least recently made or asked let go; another is read from the store at"
        " its next guard call.",
    )


SentVerdict = Literal["pass", "fail", "review"]


class EvaluationEventsConfig(Strict):
    endpoint: str | None = Field(
        None,
        description="OTLP endpoint that receives results as `gen_ai.evaluation.result` log"
        " records (grpc: http://host:4317; http/protobuf: http://host:4318/v1/logs); none: off.",
    )
    protocol: Literal["grpc", "http/protobuf"] = Field("grpc", description="OTLP transport.")
    headers: dict[str, str] = Field(default_factory=dict, description="Sent with each export.")
    verdicts: list[SentVerdict] = Field(
        default_factory=lambda: list(get_args(SentVerdict)), description="Which results are sent."
    )
    max_queue: int = Field(
        10_000, ge=1, description="Results waiting to be sent; past it new ones are dropped."
    )
    timeout_seconds: Seconds = Field(10.0, gt=0, description="Per export, retries included.")


class ReviewConfig(Strict):
    claim_seconds: Seconds = Field(
        900.0,
        gt=0,
        description="A reviewer's claim on a review item lasts this long (15m), then the item"
        " goes to the next reviewer; a label releases it at once.",
    )
