"""Runs of the services that ask the guard, kept natively before their first call; and the
clock on which the calls the native listeners answered are recorded.

A run's first guard call found it not kept: the listener's thread took the GIL to read the run
from the assembler. Behind the collector's busier threads that wait was most of a call's p99,
and an agent run asks the guard only a few times, so first calls are many. Once a service has
asked, the runs of it that start later are kept as their spans load, on the event loop, which
holds the GIL anyway: their first call is answered in the listener like every other. A run is
kept only when its acknowledged spans are all loaded (as for a call), and only while the native
side has room, so no run a call asked about is let go for one kept ahead.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence

import pyarrow as pa
import pyarrow.compute as pc
from prometheus_client import Counter

from collector.evaluation.packs import PackText
from collector.guard.native_judge import NativeJudge
from collector.normalize.native import native

log = logging.getLogger(__name__)

SERVICES_REMEMBERED = 1_000  # services that asked the guard
WAITING_MOST = 10_000  # runs waiting for their spans to load
KEPT_A_LOOK = 32  # runs kept at most each time the loop looks, so no look is long
SCANNED_A_LOOK = 128  # waiting runs looked at, at most, each time
LOOK_EVERY = 0.05  # seconds between looks while runs wait
# Seconds between looks at the guard calls the native listeners answered themselves: a wake-up
# of the loop for each call cost more than recording them; the steps gather for
# `guard.record_linger_seconds` (0.05) before they are stored anyway.
RECORD_EVERY = 0.02
WAITED_MOST = 10.0  # seconds a run waits for its spans to load before it is left to its call


class KeptAhead:
    """On the event loop: which services ask, and their runs to keep once loaded."""

    def __init__(
        self,
        native: NativeJudge,
        loaded: Callable[[str], bool],
        adopt: Callable[[str], bool],
        packs: Callable[[], Sequence[PackText]],
        kept: Counter,
    ) -> None:
        self.native = native
        self.loaded = loaded  # whether every acknowledged span of the run is loaded
        self.adopt = adopt  # keep the run natively; whether it is kept
        self._services: OrderedDict[str, None] = OrderedDict()
        self._waiting: OrderedDict[str, float] = OrderedDict()  # trace id -> since (monotonic)
        self._look: asyncio.TimerHandle | None = None
        self._recording: asyncio.TimerHandle | None = None  # the next look at answered calls
        self.kept = kept  # runs kept ahead
        # the packs in force: told the native side with a run kept, unless it was already
        self._packs = packs

    def asked(self, service: str) -> None:
        """A call about a run of `service` was answered."""
        services = self._services
        if service not in services:
            services[service] = None
            if len(services) > SERVICES_REMEMBERED:
                services.popitem(last=False)

    def seen(self, spans: pa.Table) -> None:
        """Acknowledged spans: their runs of the services that ask, not kept, wait to be."""
        if not self._services or not spans.num_rows:
            return
        asking = pc.is_in(spans["service_name"], value_set=pa.array(list(self._services)))
        traces = pc.unique(pc.filter(spans["trace_id"], asking)).to_pylist()
        waiting, now = self._waiting, time.monotonic()
        for trace_id in traces:
            if trace_id not in waiting and self.native.runs.count(trace_id) is None:
                waiting[trace_id] = now
        while len(waiting) > WAITING_MOST:
            waiting.popitem(last=False)
        if waiting and self._look is None:
            with contextlib.suppress(RuntimeError):  # no loop: the journal's replay at a start
                self._look = asyncio.get_running_loop().call_later(LOOK_EVERY, self.keep_loaded)

    def record_every(self, record: Callable[[], None]) -> None:
        """On the event loop: `record` (the calls the native listeners answered, recorded)
        every `RECORD_EVERY` until `stop`, one clock for both listeners."""
        if self._recording is None:
            self._record(record)

    def _record(self, record: Callable[[], None]) -> None:
        loop = asyncio.get_running_loop()
        self._recording = loop.call_later(RECORD_EVERY, self._record, record)
        try:
            record()
        except Exception:  # never let recording stop the next look
            log.exception("recording the guard steps answered natively failed")

    def stop(self) -> None:
        """No more looks (the collector is stopping)."""
        for handle in (self._look, self._recording):
            if handle is not None:
                handle.cancel()
        self._look = self._recording = None
        self._waiting.clear()

    def keep_loaded(self) -> None:
        """Keep the waiting runs whose spans have loaded, oldest first, while there is room;
        look again a moment later while some wait."""
        self._look = None
        waiting, runs = self._waiting, self.native.runs
        too_old = time.monotonic() - WAITED_MOST
        while waiting and next(iter(waiting.values())) < too_old:
            waiting.popitem(last=False)
        try:
            self._keep(waiting, runs)
        finally:
            if waiting:
                loop = asyncio.get_running_loop()
                self._look = loop.call_later(LOOK_EVERY, self.keep_loaded)

    def _keep(self, waiting: OrderedDict[str, float], runs: native.GuardRuns) -> None:
        taken = 0
        for trace_id in list(itertools.islice(waiting, SCANNED_A_LOOK)):
            if taken == KEPT_A_LOOK or not runs.room():
                return
            if not self.loaded(trace_id):
                continue  # a span of it acknowledged later than the next one's
            del waiting[trace_id]
            taken += 1
            if runs.count(trace_id) is None and self.adopt(trace_id):
                self.kept.inc()
                gen = runs.packs_gen()  # before the packs are read: see `NativeJudge.in_force`
                self.native.in_force(self._packs(), gen)
