"""Review items and the human labels that answer them, as rows of `results` written through the
store's one writer, shaped as the review contract says (docs/decisions.md, review backlog)."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

import orjson
import pyarrow as pa

from collector.store.tables import ARROW_SCHEMAS
from collector.store.writer import Writer
from collector.targets import Target

# What a label copies from the result it answers.
ANSWERED_COLUMNS = (
    "trace_id",
    "revision",
    "pack",
    "pack_version",
    "pack_sha256",
    "rule_id",
    "rule_type",
    "service_name",
    "agent_name",
    "service_version",
    "evidence_span_ids",
)


def store(writer: Writer, table: str, *rows: Mapping[str, Any]) -> None:
    """Rows committed through the writer (the one way stages write), waited for."""
    writer.record({table: pa.Table.from_pylist(list(rows), schema=ARROW_SCHEMAS[table])})


def run_row(trace_id: str, target: Target, at: datetime, revision: int = 1) -> dict[str, Any]:
    """A closed, current trajectory revision of `target`."""
    return {
        "trace_id": trace_id,
        "revision": revision,
        "is_current": True,
        "agent_run": True,
        "incomplete_reasons": [],
        "closed_at": at,
        "service_name": target.service,
        "agent_name": target.agent,
        "service_version": target.version,
    }


def review_row(
    trace_id: str,
    target: Target,
    at: datetime,
    rule: str = "refunds/same-customer",
    revision: int = 1,
    origin: str = "live",
    verdict: str = "review",
) -> dict[str, Any]:
    """The rule's own result (`source` NULL) asking for a review of the run, by default."""
    pack, rule_id = rule.split("/", 1)
    return {
        "trace_id": trace_id,
        "revision": revision,
        "pack": pack,
        "pack_version": "1.0.0",
        "rule_id": rule_id,
        "rule_type": "consistency",
        "verdict": verdict,
        "severity": "medium",
        "reason": "customer_mismatch",
        "message": "the root span has no enduser.id to compare with",
        "evidence_span_ids": ["00000000000000aa"],
        "service_name": target.service,
        "agent_name": target.agent,
        "service_version": target.version,
        "evaluated_at": at,
        "scope": "trajectory",
        "origin": origin,
        "replay_id": "r-1" if origin == "replay" else None,
    }


def human_label(
    answered: Mapping[str, Any],
    verdict: str,
    reviewer: str,
    at: datetime,
    comment: str = "",
    revision: int | None = None,
) -> dict[str, Any]:
    """A reviewer's label answering the result `answered` (a `results` row); `revision` labels
    another revision of the run than the answered result's."""
    row = {c: answered.get(c) for c in ANSWERED_COLUMNS}
    if revision is not None:
        row["revision"] = revision
    asked_at = answered["evaluated_at"]
    return {
        **row,
        "verdict": verdict,
        "reason": f"human_{verdict}",
        "message": comment,
        "evaluated_at": at,
        "scope": "trajectory",
        "origin": "live",
        "source": "human",
        "reviewer": reviewer,
        "details": orjson.dumps(
            {
                "answers": {
                    "verdict": answered["verdict"],
                    "reason": answered.get("reason"),
                    "evaluated_at": asked_at.isoformat(),
                }
            }
        ).decode(),
    }
