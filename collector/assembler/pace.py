"""How fast assembly works off spans, and so how far behind the spans it holds will put it.

The lag of a due trace shows a backlog only a quiet period after its spans were accepted:
spans accepted faster than they are built and evaluated for that long pile up before the lag
says so. The pace of the last rounds turns the spans held now into the lag they will cause,
which the receivers act on at once (ingest.max_assembly_lag_seconds).
"""

from __future__ import annotations

from collections import deque

ROUNDS = 20  # the pace is over this many of the latest rounds
# Rounds smaller than this are mostly their fixed cost (a query, a hand-over): their pace says
# little of how fast a backlog is worked off, and a light load never builds one.
LEAST_SPANS = 1_000
# Before the first round is timed (a quiet period after the first spans), the pace assumed: about
# half what one worker process, or one native assembly thread (assembler.native_threads),
# builds and evaluates under the shipped packs on this project's 2-core machine while ingest
# runs beside it (a native round of 20,000 spans on two threads: 0.3-0.4 s, with its read and
# commit), so a burst at start is not taken in faster than it can be judged. Real rounds
# replace it.
PRIOR_SPANS_PER_SECOND_PER_WORKER = 5_000.0
PRIOR_SPANS_PER_SECOND_PER_NATIVE_THREAD = 11_000.0


class Pace:
    """Spans per second of round time over the latest rounds. Not thread-safe: the Assembler
    holds its lock around every call."""

    def __init__(self, workers: int, native: bool = False) -> None:
        """`workers`: the worker processes, or with `native` the native threads, a round is
        built on."""
        each = (
            PRIOR_SPANS_PER_SECOND_PER_NATIVE_THREAD
            if native
            else PRIOR_SPANS_PER_SECOND_PER_WORKER
        )
        self.prior = each * max(1, workers)
        self._rounds: deque[tuple[int, float]] = deque(maxlen=ROUNDS)

    def record(self, spans: int, seconds: float) -> None:
        if spans >= LEAST_SPANS and seconds > 0:
            self._rounds.append((spans, seconds))

    def spans_per_second(self) -> float:
        """The pace of the latest rounds of `LEAST_SPANS` or more; the prior until one."""
        seconds = sum(s for _, s in self._rounds)
        return sum(n for n, _ in self._rounds) / seconds if seconds else self.prior

    def expected_lag(self, held_spans: int, quiet_seconds: float) -> float:
        """How long past its close time the last of `held_spans` will wait at this pace: the
        time to work them off less the quiet period they wait anyway."""
        return max(0.0, held_spans / self.spans_per_second() - quiet_seconds)
