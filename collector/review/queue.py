"""Review items and their queues, read from the store: the live REVIEW results of current runs
that no person has answered yet, and the pass and fail results their packs sampled for audit
(`review.audit`), each in the queue of its pack's owner: REVIEW items first (they count toward
the pack's review.sla, audits never do), each kind oldest first."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import duckdb

from collector.errors import PermanentError
from collector.store.queries import rows_as_dicts
from collector.store.review_tables import ANSWERED
from evaluators.durations import parse_duration

UNOWNED = "(no owner)"  # the queue of items whose pack is not in the store's rule_packs
KEY_COLUMNS = ("trace_id", "pack", "rule_id")  # an item: a rule of a run
KINDS = ("review", "audit")  # a REVIEW result to answer; a pass or fail sampled for audit
KIND = "CASE WHEN r.verdict = 'review' THEN 'review' ELSE 'audit' END"
# The review items, with their queue and their claim (a claim that ended is no claim).
ITEMS = f"""
WITH owners AS (
    SELECT name, arg_max(owner, loaded_at) AS owner FROM rule_packs GROUP BY name
)
SELECT r.trace_id, r.revision, r.pack, r.pack_version, r.pack_sha256, r.rule_id, r.rule_type,
       r.verdict, r.severity, r.reason, r.message, r.evidence_span_ids, r.requested_decision,
       r.service_name, r.agent_name, r.service_version, r.evaluated_at,
       coalesce(o.owner, '{UNOWNED}') AS queue, t.input AS run_input, {KIND} AS kind,
       CASE WHEN c.expires_at > $now THEN c.reviewer END AS claimed_by,
       CASE WHEN c.expires_at > $now THEN c.expires_at END AS claim_expires_at
FROM results r
JOIN trajectories t ON t.trace_id = r.trace_id AND t.revision = r.revision AND t.is_current
LEFT JOIN owners o ON o.name = r.pack
LEFT JOIN review_claims c ON c.trace_id = r.trace_id AND c.pack = r.pack AND c.rule_id = r.rule_id
WHERE r.origin = 'live' AND r.scope = 'trajectory' AND r.source IS NULL
  AND (r.verdict = 'review' OR (r.audit AND r.verdict IN ('pass', 'fail')))
  AND NOT {ANSWERED}
"""
ORDER = " ORDER BY r.verdict <> 'review', r.evaluated_at, r.trace_id, r.pack, r.rule_id"
# Per queue: items waiting, and how many of them someone holds now.
QUEUES = f"""
SELECT queue, count(*) AS waiting, count(*) FILTER (WHERE kind = 'audit') AS audit,
       count(claimed_by) AS claimed, min(evaluated_at) AS oldest
FROM ({ITEMS}) GROUP BY queue ORDER BY queue
"""


@dataclass(frozen=True)
class Filters:
    """Which items a reviewer looks at; every field given must hold."""

    queue: str = ""  # the pack owner
    pack: str = ""
    rule: str = ""
    reason: str = ""
    target: tuple[str, ...] = ()  # service[, agent[, version]]
    age: float | None = None  # waiting at most this long (seconds)
    kind: str = ""  # review | audit
    fields: dict[str, str] = field(default_factory=dict, compare=False)  # as given

    @classmethod
    def parse(cls, given: dict[str, str]) -> Filters:
        """From a form or a query string; raises PermanentError naming the bad field."""
        form = {k: (given.get(k) or "").strip() for k in FIELDS}
        target = tuple(form["target"].split("/")) if form["target"] else ()
        if len(target) > 3 or any(not part for part in target):
            raise PermanentError("target: SERVICE[/AGENT[/VERSION]]")
        try:
            age = parse_duration(form["age"]) if form["age"] else None
        except ValueError as exc:
            raise PermanentError(f"age: {exc}") from exc
        if form["kind"] and form["kind"] not in KINDS:
            raise PermanentError(f"kind: review or audit, not {form['kind']!r}")
        kept = {k: v for k, v in form.items() if v}
        return cls(
            form["queue"],
            form["pack"],
            form["rule"],
            form["reason"],
            target,
            age,
            form["kind"],
            kept,
        )

    def where(self, now: datetime) -> tuple[str, dict[str, Any]]:
        clauses: list[str] = []
        params: dict[str, Any] = {}
        for column, value in (
            ("coalesce(o.owner, '" + UNOWNED + "')", self.queue),
            ("r.pack", self.pack),
            ("r.rule_id", self.rule),
            ("r.reason", self.reason),
            (KIND, self.kind),
        ):
            if value:
                name = f"p{len(params)}"
                clauses.append(f"{column} = ${name}")
                params[name] = value
        for column, value in zip(
            ("r.service_name", "r.agent_name", "r.service_version"), self.target, strict=False
        ):
            name = f"p{len(params)}"
            clauses.append(f"{column} = ${name}")
            params[name] = value
        if self.age is not None:
            clauses.append("r.evaluated_at >= $oldest")
            params["oldest"] = now - timedelta(seconds=self.age)
        return "".join(f" AND {c}" for c in clauses), params


FIELDS = ("queue", "pack", "rule", "reason", "target", "age", "kind")


def items(
    cursor: duckdb.DuckDBPyConnection, filters: Filters, now: datetime, limit: int = 100
) -> list[dict[str, Any]]:
    """The open items the filters select, oldest first, each with its queue and claim."""
    where, params = filters.where(now)
    cursor.execute(ITEMS + where + ORDER + f" LIMIT {int(limit)}", {"now": now, **params})
    return rows_as_dicts(cursor)


def item(
    cursor: duckdb.DuckDBPyConnection, key: tuple[str, str, str], now: datetime
) -> dict[str, Any] | None:
    """One item while it is open (unanswered, on its run's current revision), else None."""
    where = " AND r.trace_id = $trace AND r.pack = $pack AND r.rule_id = $rule"
    trace, pack, rule = key
    params = {"now": now, "trace": trace, "pack": pack, "rule": rule}
    cursor.execute(ITEMS + where + ORDER + " LIMIT 1", params)
    found = rows_as_dicts(cursor)
    return found[0] if found else None


def queues(cursor: duckdb.DuckDBPyConnection, now: datetime) -> list[dict[str, Any]]:
    """Every queue with items: its owner, how many wait, how many are held, the oldest."""
    cursor.execute(QUEUES, {"now": now})
    return rows_as_dicts(cursor)


def key_of(row: dict[str, Any]) -> tuple[str, str, str]:
    return (row["trace_id"], row["pack"], row["rule_id"])
