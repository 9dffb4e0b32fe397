"""Where the batches of an assembly round are built and evaluated.

With `assembler.native` on, in a small pool of the collector's own threads (`sextant-native`,
`assembler.native_threads` of them): the native builder and rule interpreter release the GIL
while they work, and a batch's spans and tables stay in the process, so nothing is pickled to
a worker and back. A batch the native path refuses is built in Python in the same thread: it
costs the same CPU there as in a worker, less the pickling both ways (docs/performance.md,
"Native assembly in the collector's threads"), and no worker process is started at all.

With it off, the Python builder holds the GIL for all of its work, so each part of a round goes
to a worker process (collector/workers.py), a thread of the assembler (`sextant-assembler`)
waiting on it; a part too small to be worth the trip is built in the assembler's thread.
"""

from __future__ import annotations

import concurrent.futures
import logging
from datetime import datetime
from functools import partial
from typing import Any

import pyarrow as pa

from collector.assembler.native_work import assemble_batch
from collector.assembler.work import (
    Built,
    Closing,
    Evaluates,
    build_isolated,
    spans_of,
    split_round,
)
from collector.config.sections import AssemblerConfig
from collector.threads import named_executor
from collector.workers import WorkerPool

log = logging.getLogger(__name__)
# Rounds this small are built in one piece: shipping them to a worker process and back costs
# more than building them, and splitting a round has a cost per part.
INLINE_BUILD_SPANS = 200


class Dispatch:
    """Builds a round's batches side by side: in the native threads or the worker processes.

    start → build_round... → shutdown (safe twice; the parts in flight finish). Before start,
    a round is built in the calling thread.
    """

    def __init__(
        self, config: AssemblerConfig, workers: WorkerPool, price_overrides: dict[str, Any]
    ) -> None:
        self.config = config
        self.workers = workers
        self.price_overrides = price_overrides
        self._parts: concurrent.futures.ThreadPoolExecutor | None = None

    @property
    def in_threads(self) -> bool:
        """Whether batches are built in the collector's threads (never in a worker process)."""
        return self.config.native

    @property
    def width(self) -> int:
        """How many parts of a round are built side by side."""
        return self.config.native_threads if self.in_threads else self.workers.workers

    def start(self) -> None:
        if self.in_threads:
            log.info("rounds are built natively in %d threads", self.config.native_threads)
            self._parts = named_executor("sextant-native", self.config.native_threads)
        elif self.workers.workers > 1:  # a thread per worker process, waiting on its part
            self._parts = named_executor("sextant-assembler", self.workers.workers)

    def shutdown(self) -> None:
        parts, self._parts = self._parts, None
        if parts is not None:
            parts.shutdown(wait=True)

    def build_round(
        self,
        spans: pa.Table,
        closing: list[Closing],
        evaluator: Evaluates | None,
        closed_at: datetime,
    ) -> list[Built]:
        """The round's batches, a part per thread or worker process, in the round's order."""
        build = partial(self._build, closed_at)
        parts = split_round(closing, spans.num_rows, self.width, INLINE_BUILD_SPANS)
        pool = self._parts
        if pool is None or (len(parts) == 1 and not self.in_threads):
            return build_isolated(build, spans, closing, evaluator)
        if len(parts) == 1:
            return pool.submit(build_isolated, build, spans, closing, evaluator).result()
        rows = [spans_of(spans, part) for part in parts]
        futures = [
            pool.submit(build_isolated, build, part_spans, part, evaluator)
            for part_spans, part in zip(rows, parts, strict=True)
        ]
        return [built for future in futures for built in future.result()]

    def _build(
        self,
        closed_at: datetime,
        spans: pa.Table,
        closing: list[Closing],
        evaluator: Evaluates | None,
        **kw: Any,
    ) -> Built:
        native = self.config.native
        args = (spans, closing, self.price_overrides, closed_at, evaluator, kw.get("failed"))
        if self.in_threads or spans.num_rows <= INLINE_BUILD_SPANS:
            return assemble_batch(*args, native)
        return self.workers.run(assemble_batch, *args, native)
