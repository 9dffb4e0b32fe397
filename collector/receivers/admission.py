"""Back-pressure on the time work takes, not only on queue length.

At twice the rate the machine sustains, the limit is CPU (decoding, the commit), not the
writer's queue: every request is taken, each waits longer, and exporters time out at 10 s and
resend — more load, and no refusal they could act on. Instead a request is refused at once
(RESOURCE_EXHAUSTED / 503 with Retry-After, which the OTLP exporters retry with backoff) when
the work already in flight would keep it waiting longer than `ingest.max_wait_seconds`: the
bytes in flight divided by the bytes per second the receiver has been finishing. The oldest
request in flight waiting longer than the bound refuses too (a stall the rate cannot see).
The answers that are given stay fast, and the offered load falls to what is served.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from collector.errors import Overloaded

SMOOTHING = 0.2  # weight of the newest sample in the finishing rate
# Requests answered together (a batch, one journal fsync) finish at one instant: their bytes
# count as one sample over the time since the previous one, taken once this much has passed
# (or the receiver is idle), rather than as many samples over no time at all.
MIN_SAMPLE_SECONDS = 0.01


class Admission:
    """Requests in flight in arrival order, and the rate at which the receiver finishes bytes
    while it is busy; used from the event loop only (no lock)."""

    def __init__(self, max_wait: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.max_wait = max_wait
        self.clock = clock
        self._in_flight: OrderedDict[int, tuple[float, int]] = OrderedDict()
        self._bytes_in_flight = 0
        self._rate = 0.0  # bytes/s finished while busy; 0 until measured
        self._since = 0.0  # the start of what the next sample is credited for
        self._finished_bytes = 0  # finished since then, not yet in a sample
        self._next = 0

    def oldest_wait(self) -> float:
        """Seconds the oldest request in flight has been waiting (0 with none)."""
        if not self._in_flight:
            return 0.0
        return self.clock() - next(iter(self._in_flight.values()))[0]

    def expected_wait(self) -> float:
        """Seconds the bytes in flight take at the finishing rate (0 while unknown)."""
        return self._bytes_in_flight / self._rate if self._rate else 0.0

    @contextmanager
    def admitted(self, size: int) -> Iterator[None]:
        """Hold a place while a request of `size` bytes is decoded and committed; Overloaded
        when the work ahead of it is too long."""
        waited, expected = self.oldest_wait(), self.expected_wait()
        if max(waited, expected) > self.max_wait:
            error = Overloaded(
                f"an export now would wait about {max(waited, expected):.1f} s (over"
                f" ingest.max_wait_seconds = {self.max_wait:g}): decoding or committing is"
                " behind; retry later"
            )
            error.retry_after_seconds = 1
            raise error
        now = self.clock()
        if not self._in_flight:
            self._since = now  # idle time before a busy period is no work
            self._finished_bytes = 0
        key = self._next
        self._next += 1
        self._in_flight[key] = (now, size)
        self._bytes_in_flight += size
        try:
            yield
        finally:
            del self._in_flight[key]
            self._bytes_in_flight -= size
            self._finished(size)

    def _finished(self, size: int) -> None:
        """One request done: the bytes finished since the previous sample (or since the busy
        period began), over that time, are a sample of the finishing rate once it is long
        enough to mean something or the receiver falls idle."""
        now = self.clock()
        self._finished_bytes += size
        elapsed = now - self._since
        if elapsed < MIN_SAMPLE_SECONDS and self._in_flight:
            return
        sample = self._finished_bytes / max(elapsed, 1e-4)
        self._rate = sample if not self._rate else SMOOTHING * sample + (1 - SMOOTHING) * self._rate
        self._since = now
        self._finished_bytes = 0
