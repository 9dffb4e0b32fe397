"""The writer's settings: its queue, its commits, the ingest journal, and how it recognises a
re-sent span."""

from __future__ import annotations

from pydantic import Field

from collector.config.sections import Seconds, Strict


class WriterConfig(Strict):
    max_queue_rows: int = Field(
        200_000,
        gt=0,
        description="Rows waiting for commit before receivers answer RESOURCE_EXHAUSTED/503.",
    )
    max_commit_rows: int = Field(
        50_000, gt=0, description="Most rows one group commit takes from the queue."
    )
    max_linger_seconds: Seconds = Field(
        0.01,
        ge=0,
        description="Longest a commit waits for requests still being decoded, to share a commit.",
    )
    retry_after_seconds: int = Field(
        1, ge=1, description="Retry-After told to clients when the queue is full."
    )
    journal: bool = Field(
        True,
        description="Acknowledge an export once it is fsynced to the ingest journal"
        " (data_dir/journal) and load it into DuckDB behind the ack, in larger transactions;"
        " off, each ack waits for the DuckDB commit.",
    )
    journal_segment_mib: int = Field(
        64, gt=0, description="Size at which the journal starts a new segment file."
    )
    load_linger_seconds: Seconds = Field(
        0.1,
        ge=0,
        description="Longest the writer waits for more journaled rows (already acknowledged)"
        " to load them into DuckDB in one transaction.",
    )
    resent_window_seconds: Seconds = Field(
        300.0,
        gt=0,
        description="How long the writer remembers the spans it stored, to store a span an"
        " exporter sends again (a retry of a request whose answer it lost) only once. A span"
        " sent again later than this is stored twice. The OpenTelemetry Collector's exporters"
        " retry for 5 minutes by default.",
    )
    resent_max_keys: int = Field(
        8_000_000,
        gt=0,
        description="Most span keys remembered for `resent_window_seconds` (10-20 bytes each,"
        " held as they come): at a rate that fills them sooner, the window is shortened, and"
        " sextant_store_resent_window_seconds says to what.",
    )
