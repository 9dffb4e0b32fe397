"""The `decisions` table as the engine's memory: every transition appended, active ones restored.

Transitions are written through the writer outside the engine's state lock, so a slow store never
stalls a scrape; what cannot be written is kept for the next round, up to a bound.
"""

from __future__ import annotations

import logging
import threading
from datetime import datetime
from typing import Any

import orjson
import pyarrow as pa

from collector.decisions.state import DecisionState, Event, Key, Observation, State, summary_of
from collector.store.database import Database
from collector.store.tables import ARROW_SCHEMAS
from collector.store.writer import Writer
from collector.targets import Target
from evaluators.base import Decision

log = logging.getLogger(__name__)

MAX_UNWRITTEN = 10_000  # transitions held while the store cannot take them

# Each decision's latest row while it is still active, with the last acknowledgement over its
# whole history.
RESTORE = f"""
SELECT *,
    last_value(CASE WHEN event = '{Event.ACK}' THEN actor END IGNORE NULLS) OVER history
        AS acked_by,
    last_value(CASE WHEN event = '{Event.ACK}' THEN note END IGNORE NULLS) OVER history
        AS ack_note
FROM decisions
WINDOW history AS (PARTITION BY decision_id ORDER BY seq
                   ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING)
QUALIFY row_number() OVER (PARTITION BY decision_id ORDER BY seq DESC) = 1
    AND state <> '{State.RESOLVED}'
"""


class DecisionLog:
    """Appends transition rows to `decisions` and reads the active decisions back."""

    def __init__(self, database: Database, writer: Writer) -> None:
        self.database = database
        self.writer = writer
        self._lock = threading.Lock()  # guards the rows waiting to be written
        self._flush_lock = threading.Lock()  # one write at a time, in order
        self._unwritten: list[dict[str, Any]] = []

    def append(self, row: dict[str, Any]) -> None:
        """Keep a transition to write at the next `flush`."""
        with self._lock:
            self._unwritten.append(row)

    def flush(self) -> None:
        """Write what is kept; a failed write keeps it for the next round, up to MAX_UNWRITTEN."""
        with self._flush_lock:
            with self._lock:
                pending, self._unwritten = self._unwritten, []
            if not pending:
                return
            try:
                table = pa.Table.from_pylist(pending, schema=ARROW_SCHEMAS["decisions"])
                self.writer.record({"decisions": table})
            except Exception:
                log.exception("could not record %d decision transitions; retrying", len(pending))
                with self._lock:
                    self._unwritten = (pending + self._unwritten)[-MAX_UNWRITTEN:]

    def restore(
        self, now: datetime, timings: dict[str, tuple[float, float]], resolve_after: float
    ) -> list[DecisionState]:
        """Pending and firing decisions as last recorded, with their ids and acknowledgements."""
        cursor = self.database.cursor()
        try:
            cursor.execute(RESTORE)
            names = [d[0] for d in cursor.description]
            rows = [dict(zip(names, r, strict=True)) for r in cursor.fetchall()]
        finally:
            cursor.close()
        return [from_row(r, now, timings, resolve_after) for r in rows]


def row(
    state: DecisionState,
    event: Event,
    now: datetime,
    actor: str,
    note: str | None,
    recertification: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The `decisions` row of one transition."""
    f = state.finding
    return {
        "decision_id": state.id,
        "seq": state.seq,
        "event": str(event),
        "state": str(state.state),
        "decision": state.key.decision.value,
        "service_name": state.key.target.service,
        "agent_name": state.key.target.agent,
        "service_version": state.key.target.version,
        "policy": state.key.policy,
        "reasons": list(f.reasons),
        "owner": f.owner,
        "rules": list(f.rules),
        "packs": list(f.packs),
        "evidence_trace_ids": list(f.evidence),
        "summary": summary_of(state),
        "active_at": state.active_at,
        "fired_at": state.fired_at,
        "resolved_at": state.resolved_at,
        "actor": actor,
        "note": note,
        "changed_at": now,
        "recertification": orjson.dumps(recertification).decode() if recertification else None,
    }


def from_row(
    r: dict[str, Any], now: datetime, timings: dict[str, tuple[float, float]], resolve_after: float
) -> DecisionState:
    """A decision as stored. Its policy's `for` and `resolve_after` come from the packs in force
    (the default when the policy is gone), and its condition counts as seen at restart: a
    restart never resolves a decision early."""
    key = Key(
        Target(r["service_name"] or "", r["agent_name"] or "", r["service_version"] or ""),
        Decision(r["decision"]),
        r["policy"] or "",
    )
    for_seconds, resolve = timings.get(key.policy, (0.0, resolve_after))
    condition = Observation(
        reasons=tuple(r["reasons"] or ()),
        rules=tuple(r["rules"] or ()),
        packs=tuple(r["packs"] or ()),
        owner=r["owner"] or "",
        evidence=tuple(r["evidence_trace_ids"] or ()),
        for_seconds=for_seconds,
        resolve_after=resolve,
    )
    return DecisionState(
        key=key,
        id=r["decision_id"],
        state=State(r["state"]),
        active_at=r["active_at"],
        last_seen_at=now,
        finding=condition,
        fired_at=r["fired_at"],
        acked_by=r["acked_by"],
        ack_note=r["ack_note"],
        seq=r["seq"],
    )
