"""The assembler's self-metrics: open traces, closes, late spans, assembly latency."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from collector.telemetry import LATENCY_BUCKETS


class AssemblerMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.open_traces = Gauge(
            "sextant_assembler_open_traces",
            "Traces with spans but no closed trajectory yet.",
            registry=registry,
        )
        self.pending = Gauge(
            "sextant_assembler_pending_traces",
            "Traces whose latest spans have no stored trajectory (and results) yet: open,"
            " closing early at a bound, or in the round being built and stored. Read at scrape"
            " time; 0 once every trace of sextant_assembler_spans_total is assembled and"
            " evaluated.",
            registry=registry,
        )
        self.spans = Counter(
            "sextant_assembler_spans",
            "Spans of committed writes noted by the assembler (duplicates included). At or"
            ' above sextant_receiver_items_accepted{signal="traces"}, every acknowledged'
            " span has reached assembly.",
            registry=registry,
        )
        self.closed = Counter(
            "sextant_assembler_traces_closed",
            "Traces closed into a trajectory, by reason.",
            ["reason"],
            registry=registry,
        )
        self.late_spans = Counter(
            "sextant_assembler_late_spans",
            "Spans that arrived after their trace had closed (they reopen it).",
            registry=registry,
        )
        self.reopened = Counter(
            "sextant_assembler_reopened_trajectories",
            "Trajectories rebuilt with a new revision because of late spans.",
            registry=registry,
        )
        self.steps = Counter(
            "sextant_assembler_steps",
            "Steps of stored trajectories, by kind.",
            ["kind"],
            registry=registry,
        )
        self.native_batches = Counter(
            "sextant_assembler_native_batches",
            "Batches of rounds built by the native builder (assembler.native).",
            registry=registry,
        )
        self.native_fallbacks = Counter(
            "sextant_assembler_native_fallbacks",
            "Batches assembler.native was on for that were built in Python, by reason:"
            " unsupported (input the native path does not build as Python does), retry (a"
            " batch that raised, rebuilt with its failing traces as build errors), error.",
            ["reason"],
            registry=registry,
        )
        self.latency = Histogram(
            "sextant_assembler_assembly_latency_seconds",
            "From the last span of a trace being stored to its trajectory being stored.",
            buckets=(
                0.1,
                0.25,
                0.5,
                1,
                2,
                3,
                4,
                5,
                5.1,
                5.2,
                5.25,
                5.3,
                5.5,
                6,
                7.5,
                10,
                30,
                60,
                300,
            ),
            registry=registry,
        )
        self.round_duration = Histogram(
            "sextant_assembler_round_duration_seconds",
            "One assembly round: load the closing traces' spans, build, store.",
            buckets=LATENCY_BUCKETS,
            registry=registry,
        )
        self.build_errors = Counter(
            "sextant_assembler_build_errors",
            "Traces whose spans could not be built into steps; stored as incomplete (build_error).",
            registry=registry,
        )
        self.lag = Gauge(
            "sextant_assembler_lag_seconds",
            "How long the trace waiting longest past its close time has waited (0: none late).",
            registry=registry,
        )
        self.expected_lag = Gauge(
            "sextant_assembler_expected_lag_seconds",
            "How long past its close time the last span held now will wait, at the pace of the"
            " latest rounds (before the first, an assumed one); with the lag, what"
            " ingest.max_assembly_lag_seconds refuses trace exports on. Read at scrape time.",
            registry=registry,
        )
        self.held_bytes = Gauge(
            "sextant_assembler_held_bytes",
            "Bytes of committed span batches held for the open traces (assembler.max_held_mib"
            " bounds it); read at scrape time.",
            registry=registry,
        )
        self.stored_runs_bytes = Gauge(
            "sextant_assembler_stored_runs_filter_bytes",
            "Bytes of the filter of stored runs' trace ids, which spares a round asking the store"
            " about new traces (3-8 bytes a run stored at the start or closed since); read at"
            " scrape time.",
            registry=registry,
        )
        self.read_back = Counter(
            "sextant_assembler_read_back_traces",
            "Closing traces whose spans were read back from the store instead of taken from the"
            " batches held in memory, by why: recovered (open at a restart), late (spans of a"
            " trace that had closed), spilled (past assembler.max_held_mib), bound (closed at a"
            " bound, built from its first spans).",
            ["why"],
            registry=registry,
        )
        self.errors = Counter(
            "sextant_assembler_errors",
            "Assembly rounds that failed; their traces are retried on the next tick.",
            registry=registry,
        )

    def count_native(self, native: bool, fallback: str | None) -> None:
        """A batch built natively, or built in Python although asked to be native (why)."""
        if native:
            self.native_batches.inc()
        if fallback is not None:
            self.native_fallbacks.labels(fallback).inc()
