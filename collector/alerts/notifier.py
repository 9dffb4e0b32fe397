"""Turns decision transitions into notifications and delivers them, never blocking the caller.

Each channel has a bounded queue and its own thread: a slow or dead receiver delays only its own
alerts, a full queue drops the oldest (counted), and failed attempts are retried with doubling
backoff. Firing alerts are re-sent every channel's interval until they resolve, as Alertmanager
expects. Every delivery is recorded in `alerts`.
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from typing import Any

import pyarrow as pa

from collector.alerts.channels import Alertmanager, Channel, Notification, Webhook
from collector.alerts.metrics import AlertMetrics
from collector.clock import Clock, SystemClock
from collector.config.decisions import DEFAULT_SEVERITY, AlertsConfig
from collector.decisions.state import DecisionState, Event, State, merge, summary_of
from collector.lifecycle import remaining
from collector.store.tables import ARROW_SCHEMAS
from collector.store.writer import Writer
from collector.targets import TARGET_LABELS, label_values
from collector.threads import name_os_thread
from collector.ticker import Ticker
from evaluators.base import Decision

log = logging.getLogger(__name__)


class DropReason(StrEnum):
    """Why a notification was given up (the `why` of sextant_alerts_dropped_total)."""

    QUEUE_FULL = "queue_full"
    SHUTDOWN = "shutdown"
    UNDELIVERABLE = "undeliverable"


DROP_REASONS = tuple(DropReason)

# A drift or reliability rule's review of a target that has too few runs yet.
INSUFFICIENT_SAMPLES = "insufficient_samples"


def iso(t: datetime) -> str:
    return t.replace(tzinfo=UTC).isoformat().replace("+00:00", "Z")


def dedup_key(state: DecisionState) -> str:
    """One alert per target and decision, however many policies agree on it."""
    t = state.key.target
    text = f"{t.service}\x00{t.agent}\x00{t.version}\x00{state.key.decision.value}"
    return hashlib.sha256(text.encode()).hexdigest()[:16]


@dataclass
class Outbox:
    """A channel's queue and its delivery thread."""

    channel: Channel
    queue: deque[Notification]
    wake: threading.Condition
    thread: threading.Thread | None = None
    last_sent: dict[str, datetime] | None = None
    failing: bool = False


class Notifier:
    def __init__(
        self,
        config: AlertsConfig,
        writer: Writer,
        metrics: AlertMetrics,
        base_url: Callable[[], str],
        clock: Clock | None = None,
    ) -> None:
        self.config = config
        self.writer = writer
        self.metrics = metrics
        self.base_url = base_url
        self.clock = clock or SystemClock()
        self.now = self.clock.now
        channels: list[Channel] = [
            Alertmanager(c, config.timeout_seconds) for c in config.alertmanager
        ]
        channels += [Webhook(c, config.timeout_seconds, self.clock) for c in config.webhooks]
        names = [c.name for c in channels]
        duplicated = {n for n in names if names.count(n) > 1}
        if duplicated:
            raise ValueError(f"alert channel names must differ: {sorted(duplicated)} repeat")
        self.outboxes = [Outbox(c, deque(), threading.Condition(), last_sent={}) for c in channels]
        for name in names:  # at 0 from the start, so `increase()` sees a channel's first failure
            metrics.failed.labels(name)
            metrics.queued.labels(name).set(0)
            metrics.channel_failing.labels(name).set(0)
            for why in DROP_REASONS:
                metrics.dropped.labels(name, why)
        self._stopping = threading.Event()
        self._drain_deadline = 0.0
        self._lock = threading.Lock()
        # dedup key -> the alert as last sent, and the decision ids keeping it firing
        self._firing: dict[str, Notification] = {}
        self._holders: dict[str, dict[str, DecisionState]] = {}
        self.ticker = Ticker("sextant-alerts", 1.0, self.resend_due)

    def start(self) -> None:
        for box in self.outboxes:
            box.thread = threading.Thread(
                target=self._deliver_loop,
                args=(box,),
                name=f"sextant-alerts-{box.channel.name}",
                daemon=True,
            )
            box.thread.start()
        self.ticker.start()

    def shutdown(self, deadline: float) -> None:
        """Deliver what is queued (one attempt each) until `deadline`; count the rest dropped."""
        self.ticker.shutdown(deadline)
        self._drain_deadline = deadline
        self._stopping.set()
        for box in self.outboxes:
            with box.wake:
                box.wake.notify_all()
            if box.thread is not None:
                box.thread.join(remaining(deadline))

    def threads(self) -> list[threading.Thread]:
        outboxes = [box.thread for box in self.outboxes if box.thread is not None]
        return self.ticker.threads() + outboxes

    def failing(self) -> list[str]:
        return [box.channel.name for box in self.outboxes if box.failing]

    # -- from the decision engine ----------------------------------------------------------------

    def notify(self, state: DecisionState, event: Event) -> None:
        """A decision fired, changed, was acknowledged or resolved: tell every channel."""
        key = dedup_key(state)
        with self._lock:
            holders = self._holders.setdefault(key, {})
            if state.state == State.FIRING:
                holders[state.id] = state
            else:
                holders.pop(state.id, None)
            if holders:
                # One alert per target and decision: every policy's reasons and evidence on it.
                firing = self._firing.get(key)
                notification = self.notification(combined(holders), State.FIRING, firing)
                self._firing[key] = notification
            else:
                del self._holders[key]
                if key not in self._firing:
                    return  # it never fired
                notification = self.notification(state, State.RESOLVED, self._firing.pop(key))
        # Pending never notifies; new evidence alone goes out with the next re-send.
        if event not in (Event.PENDING, Event.EVIDENCE):
            self._offer_all(notification)

    def notification(
        self, state: DecisionState, status: str, previous: Notification | None = None
    ) -> Notification:
        t, f = state.key.target, state.finding
        base = self.config.external_url.rstrip("/") or self.base_url()
        labels = {
            "alertname": "Sextant" + state.key.decision.value.title(),
            "decision": state.key.decision.value,
            **dict(zip(TARGET_LABELS, label_values(t), strict=True)),
            # The alert's identity must not change while it fires: the severity and the reason
            # it fired with.
            "severity": previous.labels["severity"] if previous else self.severity(state),
            "reason": previous.labels["reason"] if previous else (f.reasons or ("unknown",))[0],
        }
        annotations = {
            "summary": summary_of(state),
            "reasons": ", ".join(f.reasons),
            "owner": f.owner,
            "decision_id": state.id,
            "rules": ", ".join(f.rules),
            "packs": ", ".join(f.packs),
            "evidence_trace_ids": ",".join(f.evidence),
        }
        # Links for people: the console's pages (the API's JSON needs a token in a header).
        annotations["decision_url"] = f"{base}/decisions/{state.id}"
        if f.evidence:
            annotations["trajectory_url"] = f"{base}/trajectories/{f.evidence[0]}"
        if state.acked_by:
            annotations["acknowledged_by"] = state.acked_by
            annotations["acknowledgement"] = state.ack_note or ""
        ends_at = state.resolved_at if status == State.RESOLVED else None
        return Notification(
            dedup_key=dedup_key(state),
            decision_id=state.id,
            status=status,
            labels=labels,
            annotations=annotations,
            # An alert keeps the start it was first sent with.
            starts_at=previous.starts_at if previous else iso(state.fired_at or state.active_at),
            ends_at=iso(ends_at or self.now()) if status == State.RESOLVED else None,
            generator_url=annotations["decision_url"],
        )

    def severity(self, state: DecisionState) -> str:
        """The decision's severity; a REVIEW that only waits for samples has its own (info by
        default): a state of the target, recorded and shown, not a page."""
        decision = state.key.decision
        if decision == Decision.REVIEW and set(state.finding.reasons) == {INSUFFICIENT_SAMPLES}:
            return self.config.insufficient_samples_severity
        return {**DEFAULT_SEVERITY, **self.config.severity}[decision]

    def resend_due(self) -> None:
        """Firing alerts go out again each channel's interval: Alertmanager forgets alerts that
        are not re-sent, and a webhook's reader is reminded."""
        now = self.now()
        with self._lock:
            firing = list(self._firing.values())
        for box in self.outboxes:
            interval = timedelta(seconds=box.channel.resend_seconds)
            for n in firing:
                last = box.last_sent.get(n.dedup_key) if box.last_sent else None
                if last is not None and now - last >= interval:
                    self.offer(box, n)

    def _offer_all(self, n: Notification) -> None:
        for box in self.outboxes:
            self.offer(box, n)

    def offer(self, box: Outbox, n: Notification) -> None:
        """Queue `n` on one channel: a waiting notification of the same alert and status is
        replaced by the newest, and a full queue drops its oldest (counted)."""
        with box.wake:
            for i, queued in enumerate(box.queue):
                if (queued.dedup_key, queued.status) == (n.dedup_key, n.status):
                    box.queue[i] = n  # still waiting: send the newest version once
                    return
            if len(box.queue) >= self.config.queue_size:
                box.queue.popleft()
                self.metrics.dropped.labels(box.channel.name, DropReason.QUEUE_FULL).inc()
            box.queue.append(n)
            self.metrics.queued.labels(box.channel.name).set(len(box.queue))
            box.wake.notify()

    # -- delivery --------------------------------------------------------------------------------

    def _deliver_loop(self, box: Outbox) -> None:
        name_os_thread()
        while True:
            with box.wake:
                while not box.queue and not self._stopping.is_set():
                    box.wake.wait()
                if not box.queue:
                    return
                if self._stopping.is_set() and time.monotonic() > self._drain_deadline:
                    self.metrics.dropped.labels(box.channel.name, DropReason.SHUTDOWN).inc(
                        len(box.queue)
                    )
                    box.queue.clear()
                    return
                n = box.queue.popleft()
                self.metrics.queued.labels(box.channel.name).set(len(box.queue))
            try:
                self._deliver(box, n)
            except Exception:
                log.exception("alert delivery to %s failed unexpectedly", box.channel.name)

    def _deliver(self, box: Outbox, n: Notification) -> None:
        name = box.channel.name
        delay = self.config.backoff_seconds
        for attempt in range(1, self.config.max_attempts + 1):
            if n.status == State.FIRING and n.dedup_key not in self._firing:
                return  # resolved while waiting: the resolved notification follows
            result = box.channel.deliver(n)
            self.metrics.channel_failing.labels(name).set(0 if result.ok else 1)
            if result.ok:
                box.failing = False
                if box.last_sent is not None:
                    box.last_sent[n.dedup_key] = self.now()
                self.metrics.sent.labels(name, n.status).inc()
                self._record(box, n, attempt, result.ok, result.http_status, None)
                return
            self.metrics.failed.labels(name).inc()
            log.warning("alert to %s failed (attempt %d): %s", name, attempt, result.error)
            if not result.retry or attempt == self.config.max_attempts:
                break
            if self._stopping.wait(delay):
                break
            delay *= 2
        box.failing = True
        if box.last_sent is not None and n.status == State.FIRING:
            box.last_sent[n.dedup_key] = self.now()  # try again at the next re-send
        self.metrics.dropped.labels(name, DropReason.UNDELIVERABLE).inc()
        self._record(box, n, attempt, False, result.http_status, result.error)

    def _record(
        self,
        box: Outbox,
        n: Notification,
        attempt: int,
        ok: bool,
        http_status: int | None,
        error: str | None,
    ) -> None:
        row: dict[str, Any] = {
            "decision_id": n.decision_id,
            "channel": box.channel.name,
            "kind": box.channel.kind,
            "status": n.status,
            "dedup_key": n.dedup_key,
            "attempt": attempt,
            "ok": ok,
            "http_status": http_status,
            "error": error,
            "sent_at": self.now(),
        }
        table = pa.Table.from_pylist([row], schema=ARROW_SCHEMAS["alerts"])
        try:
            self.writer.record({"alerts": table})
        except Exception as exc:
            log.warning("could not record alert delivery to %s: %s", box.channel.name, exc)

    def test(self) -> list[dict[str, Any]]:
        """Send one test alert through every channel now, once, and say how each went."""
        now = self.now()
        base = self.config.external_url.rstrip("/") or self.base_url()
        n = Notification(
            dedup_key="test",
            decision_id=None,
            status="test",
            labels={
                "alertname": "SextantTest",
                "decision": "REVIEW",
                "service": "sextant",
                "agent": "*",
                "version": "*",
                "severity": "none",
                "reason": "alert_channel_test",
            },
            annotations={"summary": "Sextant test alert: the channel works."},
            starts_at=iso(now),
            ends_at=iso(now + timedelta(minutes=5)),
            generator_url=f"{base}/decisions",
        )
        report = []
        for box in self.outboxes:
            result = box.channel.deliver(replace(n))
            box.failing = not result.ok
            self.metrics.channel_failing.labels(box.channel.name).set(0 if result.ok else 1)
            if result.ok:
                self.metrics.sent.labels(box.channel.name, "test").inc()
            else:
                self.metrics.failed.labels(box.channel.name).inc()
            self._record(box, n, 1, result.ok, result.http_status, result.error)
            report.append(
                {
                    "channel": box.channel.name,
                    "kind": box.channel.kind,
                    "ok": result.ok,
                    "http_status": result.http_status,
                    "error": result.error,
                }
            )
        return report


def combined(holders: dict[str, DecisionState]) -> DecisionState:
    """The oldest firing decision, carrying the merged findings of all of them."""
    states = sorted(holders.values(), key=lambda s: s.active_at)
    finding = states[0].finding
    for other in states[1:]:
        finding = merge(finding, other.finding)
    return replace(states[0], finding=finding)
