"""Back-pressure on the time work takes, not only on queue length.

At twice the rate the machine sustains, the limit is CPU (decoding in the workers, the commit),
not the writer's queue: every request is taken, each waits longer, and exporters time out at
10 s and resend — more load, no refusal they could act on. Instead a request is refused at
once (RESOURCE_EXHAUSTED / 503 with Retry-After, which the OTLP exporters retry with backoff)
while the oldest request in flight has been waiting longer than `ingest.max_wait_seconds`:
the answers that are given stay fast, and the load the clients offer falls to what is served.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from collector.errors import Overloaded


class Admission:
    """Requests in flight in arrival order; used from the event loop only (no lock)."""

    def __init__(self, max_wait: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.max_wait = max_wait
        self.clock = clock
        self._in_flight: OrderedDict[int, float] = OrderedDict()
        self._next = 0

    def oldest_wait(self) -> float:
        """Seconds the oldest request in flight has been waiting (0 with none)."""
        if not self._in_flight:
            return 0.0
        return self.clock() - next(iter(self._in_flight.values()))

    @contextmanager
    def admitted(self) -> Iterator[None]:
        """Hold a place while the request is decoded and committed; Overloaded when behind."""
        waited = self.oldest_wait()
        if waited > self.max_wait:
            error = Overloaded(
                f"the oldest export in flight has waited {waited:.1f} s (over"
                f" ingest.max_wait_seconds = {self.max_wait:g}): decoding or committing is"
                " behind; retry later"
            )
            error.retry_after_seconds = 1
            raise error
        key = self._next
        self._next += 1
        self._in_flight[key] = self.clock()
        try:
            yield
        finally:
            del self._in_flight[key]
