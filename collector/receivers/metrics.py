"""The receivers' self-metrics: requests answered, items received, accepted and rejected."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Histogram

from collector.receivers.misdirected import Misdirected
from collector.telemetry import LATENCY_BUCKETS

BATCH_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256)


class ReceiverMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.requests = Counter(
            "sextant_receiver_requests",
            "Export requests answered, by protocol, signal and outcome.",
            ["protocol", "signal", "status"],
            registry=registry,
        )
        self.request_duration = Histogram(
            "sextant_receiver_request_duration_seconds",
            "Time from a request's arrival to its answer (includes waiting for the journal's"
            " fsync, or for the commit without a journal).",
            ["protocol", "signal"],
            buckets=LATENCY_BUCKETS,
            registry=registry,
        )
        self.received = Counter(
            "sextant_receiver_items_received",
            "Spans or log records decoded from requests.",
            ["protocol", "signal"],
            registry=registry,
        )
        self.accepted = Counter(
            "sextant_receiver_items_accepted",
            "Spans or log records committed to the store and acknowledged.",
            ["protocol", "signal"],
            registry=registry,
        )
        self.rejected = Counter(
            "sextant_receiver_items_rejected",
            "Spans or log records rejected alone (reported in partial_success), by reason.",
            ["protocol", "signal", "reason"],
            registry=registry,
        )
        self.refused = Counter(
            "sextant_receiver_refused_requests",
            "Trace export requests refused before decoding, retryable, by reason:"
            " assembly_behind (assembly and evaluation past ingest.max_assembly_lag_seconds).",
            ["reason"],
            registry=registry,
        )
        self.batch_requests = Histogram(
            "sextant_receiver_batch_requests",
            "Small protobuf export requests decoded, journaled and loaded together as one batch"
            " (1: a request taken alone), by protocol and signal.",
            ["protocol", "signal"],
            buckets=BATCH_BUCKETS,
            registry=registry,
        )
        self.truncated = Counter(
            "sextant_receiver_items_truncated",
            "Spans or log records stored with at least one attribute value truncated.",
            ["signal"],
            registry=registry,
        )
        self.misdirected = Misdirected(registry)
