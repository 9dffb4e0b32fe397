"""The alert channels' self-metrics: notifications sent, failed, dropped and queued."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge


class AlertMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.sent = Counter(
            "sextant_alerts_sent",
            "Alert notifications delivered, by channel and status (firing, resolved, test).",
            ["channel", "status"],
            registry=registry,
        )
        self.failed = Counter(
            "sextant_alerts_failed_attempts",
            "Delivery attempts that failed (each retry counts), by channel.",
            ["channel"],
            registry=registry,
        )
        self.dropped = Counter(
            "sextant_alerts_dropped",
            "Notifications given up: queue full or out of attempts, by channel and why.",
            ["channel", "why"],
            registry=registry,
        )
        self.queued = Gauge(
            "sextant_alerts_queued",
            "Notifications waiting for delivery, by channel.",
            ["channel"],
            registry=registry,
        )
        self.channel_failing = Gauge(
            "sextant_alerts_channel_failing",
            "1 from a channel's failed delivery attempt until one succeeds, else 0.",
            ["channel"],
            registry=registry,
        )
