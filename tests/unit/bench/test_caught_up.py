"""When the benchmark calls the collector caught up: from one scrape of its own counters."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, generate_latest

from collector.assembler.metrics import AssemblerMetrics
from collector.bench.served import assembled, share_assembled
from collector.receivers.metrics import ReceiverMetrics


class Collector:
    """The collector's real metric families, set by hand, exposed as /metrics would be."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.receiver = ReceiverMetrics(self.registry)
        self.assembler = AssemblerMetrics(self.registry)
        self.pending = 0
        self.assembler.pending.set_function(lambda: self.pending)

    def scrape(self) -> str:
        return generate_latest(self.registry).decode()


def test_caught_up_once_every_acknowledged_span_is_noted_and_nothing_is_pending() -> None:
    c = Collector()
    c.receiver.accepted.labels("grpc", "traces").inc(1000)
    c.receiver.accepted.labels("grpc", "logs").inc(50)  # logs are not assembled
    c.assembler.spans.inc(990)  # the journal acknowledged 10 spans not loaded yet
    assert not assembled(c.scrape())  # nothing pending, but not everything noted either
    c.assembler.spans.inc(10)
    c.pending = 3
    assert not assembled(c.scrape())
    c.pending = 0
    assert assembled(c.scrape())


def test_a_collector_without_the_counters_is_never_caught_up() -> None:
    registry = CollectorRegistry()
    ReceiverMetrics(registry)
    assert not assembled(generate_latest(registry).decode())
    assert not assembled("")


def test_the_share_assembled_counts_closed_traces_against_those_still_pending() -> None:
    c = Collector()
    c.receiver.accepted.labels("grpc", "traces").inc(1000)
    c.assembler.spans.inc(990)
    c.assembler.closed.labels("complete").inc(98)
    assert share_assembled(c.scrape()) == 0  # spans acknowledged have not all reached it
    c.assembler.spans.inc(10)
    c.pending = 2
    assert share_assembled(c.scrape()) == 0.98
    c.assembler.closed.labels("incomplete_timeout").inc(1)
    c.pending = 1
    assert share_assembled(c.scrape()) == 0.99
