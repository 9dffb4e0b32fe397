"""The review queues on /metrics: unanswered items per queue (owner and pack), REVIEW items and
audit items apart (only the former count toward the SLA), the age of the longest-waiting REVIEW
item, and the pack's review.sla, read at scrape time from what the last decision round found
(a scrape never queries the store).

Labels are owner and pack only, both from the packs: their number is bounded by the packs ever
loaded, never by runs, targets or reviewers.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from collector.clock import Clock
from collector.review.backlog import Queue

LABELS = ["owner", "pack"]


class ReviewBacklogCollector(Collector):
    def __init__(self, queues: Callable[[], Mapping[tuple[str, str], Queue]], clock: Clock) -> None:
        self.queues = queues
        self.clock = clock

    def collect(self) -> Iterator[GaugeMetricFamily]:
        queues = sorted(self.queues().items())
        now = self.clock.now()
        items = GaugeMetricFamily(
            "sextant_review_queue_items",
            "Review items (live REVIEW results of current runs) no human label answers yet, by"
            " queue: the pack and its owner.",
            labels=LABELS,
        )
        oldest = GaugeMetricFamily(
            "sextant_review_oldest_item_seconds",
            "How long the queue's longest-waiting review item has waited for a label (0 when"
            " the queue is empty).",
            labels=LABELS,
        )
        audits = GaugeMetricFamily(
            "sextant_review_audit_items",
            "Audit items (pass and fail results the pack's review.audit sampled) no human label"
            " answers yet, by queue; optional checks, apart from the review.sla backlog.",
            labels=LABELS,
        )
        sla = GaugeMetricFamily(
            "sextant_review_sla_seconds",
            "The pack's review.sla: how long a review item may wait (packs in force with one).",
            labels=LABELS,
        )
        for (owner, pack), q in queues:
            items.add_metric([owner, pack], float(q.items))
            audits.add_metric([owner, pack], float(q.audits))
            age = 0.0 if q.oldest is None else max(0.0, (now - q.oldest).total_seconds())
            oldest.add_metric([owner, pack], age)
            if q.sla is not None:
                sla.add_metric([owner, pack], q.sla)
        yield items
        yield audits
        yield oldest
        yield sla
