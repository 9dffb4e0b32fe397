"""Senders that send into the void: a wrong path, method, token, content type, or OTLP/JSON in
a shape the receiver does not know. Their data never arrives and nothing on their side says
why, so each such request is counted by reason and logged, at most once a minute per reason,
with who sent it and what they should send instead."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from prometheus_client import CollectorRegistry, Counter

log = logging.getLogger(__name__)

LOG_EVERY_SECONDS = 60.0
# reason -> what to do about it
HINTS = {
    "not_found": "OTLP/HTTP takes POST /v1/traces and /v1/logs (an exporter's endpoint is"
    " the base URL, e.g. http://host:4318, or the full URL with /v1/traces)",
    "method_not_allowed": "OTLP/HTTP exports are POST requests",
    "unauthenticated": "send `Authorization: Bearer <token>` with a token of auth.tokens"
    " (OTEL_EXPORTER_OTLP_HEADERS=Authorization=Bearer%20<token>)",
    "unsupported_media_type": "send Content-Type application/x-protobuf or application/json,"
    " Content-Encoding gzip or none",
    "unknown_json_keys": "an OTLP/JSON export request is an object with resourceSpans (traces)"
    " or resourceLogs (logs); other top-level keys are ignored",
}
PROTOCOL_REASONS = {
    "http": tuple(HINTS),
    "grpc": ("unauthenticated",),
}


class Misdirected:
    """`sextant_receiver_misdirected_requests_total{protocol, reason}` and a rate-limited
    warning per reason; every label set exists at 0 from the start."""

    def __init__(
        self,
        registry: CollectorRegistry,
        clock: Callable[[], float] = time.monotonic,
        every: float = LOG_EVERY_SECONDS,
    ) -> None:
        self.requests = Counter(
            "sextant_receiver_misdirected_requests",
            "Requests refused or ignored because the sender is misconfigured, by reason.",
            ["protocol", "reason"],
            registry=registry,
        )
        for protocol, reasons in PROTOCOL_REASONS.items():
            for reason in reasons:
                self.requests.labels(protocol, reason)
        self.clock = clock
        self.every = every
        self._lock = threading.Lock()
        self._last: dict[tuple[str, str], float] = {}
        self._since: dict[tuple[str, str], int] = {}

    def note(self, protocol: str, reason: str, peer: str, what: str) -> None:
        """One misdirected request from `peer` (address and user agent); `what` it asked."""
        self.requests.labels(protocol, reason).inc()
        key = (protocol, reason)
        now = self.clock()
        with self._lock:
            self._since[key] = self._since.get(key, 0) + 1
            if now - self._last.get(key, float("-inf")) < self.every:
                return
            self._last[key] = now
            count, self._since[key] = self._since[key], 0
        log.warning(
            "%s request refused or ignored (%s, %d since the last such warning): %s from %s; %s",
            protocol.upper(),
            reason,
            count,
            what,
            peer,
            HINTS[reason],
        )
