"""A store with review items (live REVIEW results of current runs) and a review desk over it,
for the review desk's and the decision engine's unit tests."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

import pyarrow as pa
from prometheus_client import CollectorRegistry

from collector.clock import Clock
from collector.config.evaluation import ReviewConfig
from collector.config.writer import WriterConfig
from collector.evaluation.packs import PackText
from collector.lifecycle import deadline_in
from collector.review.desk import ReviewDesk
from collector.store.database import Database
from collector.store.metrics import StoreMetrics
from collector.store.tables import ARROW_SCHEMAS
from collector.store.writer import Writer
from collector.targets import Target

MCP_PACK = """
name: support-mcp
version: "1.0.0"
owner: agent-security
rules:
  - id: known-mcp-servers
    type: mcp
    servers: ["crm-server"]
    unknown_server: review
    reason: mcp_server_not_allowed
    severity: high
    on_fail: QUARANTINE
"""
SUPPORT = Target("support-desk", "support-agent", "2.0.0")


@dataclass
class Packs:
    """The packs in force, as the pack registry hands them out."""

    texts: dict[str, str] = field(default_factory=lambda: {"support-mcp": MCP_PACK})

    def snapshot(self) -> tuple[PackText, ...]:
        return tuple(
            PackText(name, hashlib.sha256(text.encode()).hexdigest(), text)
            for name, text in self.texts.items()
        )


class ReviewStore:
    """A DuckDB file, its writer, and rows written as the stages write them."""

    def __init__(self, path: Path) -> None:
        self.database = Database(path)
        self.database.open()
        self.writer = Writer(self.database, WriterConfig(), StoreMetrics(CollectorRegistry()))
        self.writer.start()

    def close(self) -> None:
        self.writer.shutdown(deadline_in(5))
        for thread in self.writer.threads():  # its last commit done, even on a slow machine
            thread.join(60)
        self.database.close()

    def insert(self, table: str, **row: object) -> None:
        data = pa.Table.from_pylist([row], schema=ARROW_SCHEMAS[table])
        self.writer.submit_tables({table: data}).result(5)

    def pack(self, at: datetime, name: str = "support-mcp", owner: str = "agent-security") -> None:
        self.insert("rule_packs", name=name, version="1.0.0", sha256="0" * 64, owner=owner,
                    loaded_at=at)  # fmt: skip

    def review(
        self,
        at: datetime,
        trace_id: str,
        target: Target = SUPPORT,
        revision: int = 1,
        rule_id: str = "known-mcp-servers",
        reason: str = "mcp_server_unknown",
        verdict: str = "review",
        audit: bool | None = None,
    ) -> None:
        """A closed run of `target` whose MCP rule asks for a review (by default), or passed or
        failed it, sampled for audit or not."""
        self.insert(
            "trajectories", trace_id=trace_id, revision=revision, is_current=True,
            agent_run=True, incomplete_reasons=[], closed_at=at, service_name=target.service,
            agent_name=target.agent, service_version=target.version,
        )  # fmt: skip
        self.insert(
            "results", trace_id=trace_id, revision=revision, pack="support-mcp",
            pack_version="1.0.0", pack_sha256="a" * 64, rule_id=rule_id, rule_type="mcp",
            verdict=verdict, severity="high", reason=reason if verdict != "pass" else None,
            message="1 MCP call(s) to a server the trace does not name",
            evidence_span_ids=["00000000000000e1"],
            requested_decision={"review": "REVIEW", "fail": "QUARANTINE"}.get(verdict),
            evaluated_at=at, scope="trajectory", origin="live", service_name=target.service,
            agent_name=target.agent, service_version=target.version, audit=audit,
        )  # fmt: skip

    def rows(self, sql: str, params: list[object] | None = None) -> list[dict[str, object]]:
        cursor = self.database.cursor()
        try:
            cursor.execute(sql, params or [])
            names = [d[0] for d in cursor.description]
            return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]
        finally:
            cursor.close()


def desk_over(store: ReviewStore, clock: Clock, claim_seconds: float = 900.0) -> ReviewDesk:
    config = ReviewConfig(claim_seconds=claim_seconds)
    return ReviewDesk(store.database, store.writer, Packs(), config, clock)
