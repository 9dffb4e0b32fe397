"""What replay, export and evidence read stored data through; `collector/cli/_source.py` opens
one (a running collector, a DuckDB file or a Parquet export)."""

from __future__ import annotations

from typing import Any, Protocol

import pyarrow as pa


class Source(Protocol):
    """Runs read-only SQL over the store's tables, whichever way they are reached."""

    name: str

    def query(self, sql: str, params: list | None = None) -> pa.Table: ...

    def trajectory(self, trace_id: str, revision: int | None = None) -> dict[str, Any] | None:
        """The document `GET /api/v1/trajectories/{id}` returns; None when there is none."""
        ...

    def rules_status(self) -> dict[str, Any] | None:
        """A running collector's `GET /api/v1/rules`; None for a stored copy."""
        ...

    def close(self) -> None: ...


class Opener(Protocol):
    """Something picklable that opens a Source: how a replay worker process gets its own."""

    def open(self) -> Source: ...
