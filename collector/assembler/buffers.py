"""Per-trace buffers and the close policy: quiet period, maximum age, memory bounds."""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field
from datetime import datetime

from collector.config.sections import AssemblerConfig


@dataclass(slots=True)
class OpenTrace:
    """What the assembler remembers of a trace until it closes: its counts and clocks, and the
    committed batches its spans are held in (collector/assembler/held.py). `read_back` says why
    those are not all of its spans, and so why it is read from the store when it closes:
    "recovered" (open at a restart), "spilled" (a batch was let go past the memory cap); None
    when they are all."""

    trace_id: str
    first_seen: float  # monotonic seconds
    last_seen: float
    first_received: datetime  # the store's received_at of its first and last spans
    last_received: datetime
    spans: int = 0
    root_seen: bool = False
    batches: list[int] = field(default_factory=list)
    read_back: str | None = "recovered"


class TraceBuffers:
    """Open traces in two orders: by last activity (quiet period) and by first arrival (age).

    Both scans stop at the first trace that is not due, so a tick costs what it closes, not what
    is open. Not thread-safe: the Assembler holds its lock around every call.
    """

    def __init__(self, config: AssemblerConfig) -> None:
        self.config = config
        self._by_activity: OrderedDict[str, OpenTrace] = OrderedDict()
        self._by_age: dict[str, OpenTrace] = {}  # insertion order is first-arrival order
        self.spans = 0  # spans of the open traces (duplicates included)
        # Recently closed traces that had their root: a late span reopens them as rooted.
        self._closed_rooted: OrderedDict[str, None] = OrderedDict()

    def __len__(self) -> int:
        return len(self._by_age)

    def __contains__(self, trace_id: str) -> bool:
        return trace_id in self._by_age

    def get(self, trace_id: str) -> OpenTrace | None:
        return self._by_age.get(trace_id)

    def add(
        self,
        trace_id: str,
        spans: int,
        root: bool,
        received: datetime,
        now: float,
        batch: int | None = None,
    ) -> list[tuple[OpenTrace, str]]:
        """Record spans of a trace, held in batch `batch` (None: not held); returns traces that
        must close now because of the bounds."""
        closing: list[tuple[OpenTrace, str]] = []
        trace = self._by_age.get(trace_id)
        if trace is None:
            if len(self._by_age) >= self.config.max_open_traces:
                oldest = next(iter(self._by_age.values()))
                self._remove(oldest)
                closing.append((oldest, "incomplete_bound"))
            trace = OpenTrace(
                trace_id,
                now,
                now,
                received,
                received,
                read_back=None if batch is not None else "recovered",
            )
            trace.root_seen = trace_id in self._closed_rooted
            self._by_age[trace_id] = trace
        trace.spans += spans
        self.spans += spans
        trace.root_seen |= root
        if batch is None:
            trace.read_back = trace.read_back or "recovered"
        else:
            trace.batches.append(batch)
        trace.last_seen = now
        trace.last_received = max(trace.last_received, received)
        self._by_activity[trace_id] = trace
        self._by_activity.move_to_end(trace_id)
        if trace.spans > self.config.max_spans_per_trace:
            self._remove(trace)
            closing.append((trace, "incomplete_bound"))
        return closing

    def restore(self, traces: list[OpenTrace]) -> None:
        """Put back traces recovered after a restart or a failed round, keeping their clocks.

        A trace that got new spans meanwhile is merged with what came back, so those spans
        stay covered.
        """
        for trace in traces:
            newer = self._by_age.get(trace.trace_id)
            self.spans += trace.spans
            if newer is not None:
                trace.spans += newer.spans
                trace.root_seen |= newer.root_seen
                trace.last_seen = max(trace.last_seen, newer.last_seen)
                trace.last_received = max(trace.last_received, newer.last_received)
                trace.batches = sorted(trace.batches + newer.batches)  # in arrival order
                trace.read_back = trace.read_back or newer.read_back
            self._by_age[trace.trace_id] = trace
            self._by_activity[trace.trace_id] = trace
        self._by_age = dict(sorted(self._by_age.items(), key=lambda kv: kv[1].first_seen))
        self._by_activity = OrderedDict(
            sorted(self._by_activity.items(), key=lambda kv: kv[1].last_seen)
        )

    def remember_rooted(self, trace_ids: list[str]) -> None:
        """Traces that closed with their root before a restart, oldest first: their late spans
        reopen them as rooted, as they would have without the restart."""
        for trace_id in trace_ids:
            self._closed_rooted[trace_id] = None
            self._closed_rooted.move_to_end(trace_id)
        while len(self._closed_rooted) > self.config.max_open_traces:
            self._closed_rooted.popitem(last=False)

    def due(self, now: float, limit: int | None = None) -> list[tuple[OpenTrace, str]]:
        """Remove and return (at most `limit` of) the traces that close at `now`, with why."""
        closing: list[tuple[OpenTrace, str]] = []
        limit = limit or len(self._by_age)
        quiet_before = now - self.config.quiet_period_seconds
        for trace in self._by_activity.values():
            if trace.last_seen > quiet_before or len(closing) >= limit:
                break
            if trace.root_seen:
                closing.append((trace, "complete"))
        old_before = now - self.config.max_trace_age_seconds
        for trace in self._by_age.values():
            if trace.first_seen > old_before or len(closing) >= limit:
                break
            if not trace.root_seen or trace.last_seen > quiet_before:
                # No root, or still busy at its maximum age: close what it has, as incomplete.
                closing.append((trace, "incomplete_timeout"))
        for trace, _ in closing:
            self._remove(trace)
            if trace.root_seen:
                self._closed_rooted[trace.trace_id] = None
                self._closed_rooted.move_to_end(trace.trace_id)
        while len(self._closed_rooted) > self.config.max_open_traces:
            self._closed_rooted.popitem(last=False)
        return closing

    def overdue(self, now: float, limit: int) -> int:
        """How many traces (up to `limit`) have been due for longer than a tick: the backlog of
        runs that should have been evaluated by now and were not."""
        quiet_before = now - self.config.quiet_period_seconds - self.config.tick_seconds
        count = 0
        for trace in self._by_activity.values():
            if trace.last_seen > quiet_before or count >= limit:
                break
            count += trace.root_seen
        return count

    def late_since(self, now: float) -> float | None:
        """When the trace waiting longest past its close time became due, or None when none
        is late: the assembler's lag, whatever holds it up (failed rounds, a slow store)."""
        due = []
        quiet = self.config.quiet_period_seconds
        for trace in self._by_activity.values():  # stops at the first not yet quiet
            if trace.last_seen + quiet > now:
                break
            if trace.root_seen:
                due.append(trace.last_seen + quiet)
                break
        if self._by_age:
            oldest = next(iter(self._by_age.values()))
            if oldest.first_seen + self.config.max_trace_age_seconds <= now:
                due.append(oldest.first_seen + self.config.max_trace_age_seconds)
        return min(due, default=None)

    def next_due(self) -> float | None:
        """The earliest monotonic time a trace may close (a lower bound), or None when none is
        open: the assembler sleeps until then instead of polling."""
        candidates = []
        if self._by_activity:
            oldest_activity = next(iter(self._by_activity.values()))
            candidates.append(oldest_activity.last_seen + self.config.quiet_period_seconds)
        if self._by_age:
            oldest = next(iter(self._by_age.values()))
            candidates.append(oldest.first_seen + self.config.max_trace_age_seconds)
        return min(candidates) if candidates else None

    def _remove(self, trace: OpenTrace) -> None:
        if self._by_age.pop(trace.trace_id, None) is not None:
            self.spans -= trace.spans
        self._by_activity.pop(trace.trace_id, None)
