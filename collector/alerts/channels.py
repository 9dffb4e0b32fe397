"""Where alerts go: the Alertmanager v2 API and signed JSON webhooks. One HTTP POST each.

A channel only knows how to deliver one notification and say whether to try again; queueing,
retries and re-sending live in the notifier.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
from dataclasses import dataclass
from typing import Any

import aiohttp
import orjson

from collector.clock import Clock
from collector.config.decisions import AlertmanagerChannel, WebhookChannel
from collector.redact import header_secrets, redact, shown_url, url_secrets

SIGNATURE_HEADER = "X-Sextant-Signature"
TIMESTAMP_HEADER = "X-Sextant-Timestamp"


@dataclass(frozen=True)
class Notification:
    """One alert as every channel sees it (Alertmanager's shape, which webhooks also get)."""

    dedup_key: str
    decision_id: str | None
    status: str  # firing | resolved | test
    labels: dict[str, str]
    annotations: dict[str, str]
    starts_at: str
    ends_at: str | None
    generator_url: str


@dataclass(frozen=True)
class Delivery:
    ok: bool
    retry: bool
    http_status: int | None = None
    error: str | None = None


def post(url: str, body: bytes, headers: dict[str, str], timeout: float) -> Delivery:
    """One POST that takes at most `timeout` seconds in all: connecting, sending and reading the
    reply share it. (A per-read timeout, urllib's, lets a receiver that trickles a byte every few
    seconds hold the calling thread for minutes.) Called from the notifier's channel threads and
    the admin API's worker threads, none of which runs an event loop: each call runs its own."""
    try:
        return asyncio.run(post_within(url, body, headers, timeout))
    except TimeoutError:
        return Delivery(
            False,
            True,
            None,
            f"no complete reply from {shown_url(url)} within {timeout:g} s"
            " (alerts.timeout_seconds)",
        )


async def post_within(url: str, body: bytes, headers: dict[str, str], timeout: float) -> Delivery:
    deadline = aiohttp.ClientTimeout(total=timeout)
    try:
        async with (
            aiohttp.ClientSession(timeout=deadline, trust_env=True) as session,
            session.post(url, data=body, headers=headers, allow_redirects=False) as reply,
        ):
            if reply.status < 300:
                return Delivery(True, False, reply.status)
            detail = (await reply.content.read(4000)).decode(errors="replace")
    except aiohttp.ClientError as exc:
        if isinstance(exc, TimeoutError):
            raise
        error = redact(f"cannot reach {shown_url(url)}: {exc}", url_secrets(url))
        return Delivery(False, True, None, error)
    # 429 and 5xx are the receiver's trouble and pass; other 4xx will fail again the same way.
    retry = reply.status == 429 or reply.status >= 500
    # Stored in `alerts` and logged: credentials out before it is cut, no piece of one left.
    detail = redact(detail, [*header_secrets(headers), *url_secrets(url)])[:200]
    return Delivery(False, retry, reply.status, f"HTTP {reply.status}: {detail}")


class Alertmanager:
    kind = "alertmanager"

    def __init__(self, config: AlertmanagerChannel, timeout: float) -> None:
        self.name = config.name
        self.url = config.url.rstrip("/") + "/api/v2/alerts"
        self.resend_seconds = config.resend_seconds
        self.timeout = timeout

    def deliver(self, n: Notification) -> Delivery:
        alert: dict[str, Any] = {
            "labels": n.labels,
            "annotations": n.annotations,
            "startsAt": n.starts_at,
            "generatorURL": n.generator_url,
        }
        if n.ends_at:
            alert["endsAt"] = n.ends_at
        body = orjson.dumps([alert])
        return post(self.url, body, {"Content-Type": "application/json"}, self.timeout)


class Webhook:
    kind = "webhook"

    def __init__(self, config: WebhookChannel, timeout: float, clock: Clock) -> None:
        self.clock = clock
        self.name = config.name
        self.url = config.url
        self.resend_seconds = config.renotify_seconds
        self.secret = config.secret.get_secret_value().encode() if config.secret else None
        self.timeout = timeout

    def deliver(self, n: Notification) -> Delivery:
        body = orjson.dumps(
            {
                "version": "1",
                "dedup_key": n.dedup_key,
                "decision_id": n.decision_id,
                "status": n.status,
                "labels": n.labels,
                "annotations": n.annotations,
                "startsAt": n.starts_at,
                "endsAt": n.ends_at,
                "generatorURL": n.generator_url,
            }
        )
        headers = {"Content-Type": "application/json"}
        if self.secret is not None:
            timestamp = str(int(self.clock.wall()))
            headers[TIMESTAMP_HEADER] = timestamp
            headers[SIGNATURE_HEADER] = "sha256=" + sign(self.secret, timestamp, body)
        return post(self.url, body, headers, self.timeout)


def sign(secret: bytes, timestamp: str, body: bytes) -> str:
    """HMAC-SHA256 over `timestamp.body`: the timestamp is signed so a capture cannot be replayed
    later with a fresh one."""
    return hmac.new(secret, timestamp.encode() + b"." + body, hashlib.sha256).hexdigest()


Channel = Alertmanager | Webhook
