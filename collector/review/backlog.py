"""The review backlog: live REVIEW results a person should answer and no human label answers
yet, per pack and target, in one query of the decision round's snapshot.

A review item is a `results` row with origin `live`, scope `trajectory`, no `source` (the
rule's own evaluator) and verdict `review`, of its trajectory's current revision: no later
revision has closed (a later one closes after the result, so it lies within the scan's time
bound, as in the decision queries). A human label (`source = 'human'`, verdict `pass`, `fail`
or `not_applicable`) for the same trace, pack and rule at the same or a later revision answers
it. An item waits from when it was first asked for (its earliest `evaluated_at`, should the
same revision be evaluated again), so a re-evaluation never resets its age.

Audit items (pass and fail results a pack's `review.audit` sampled) are optional quality
checks: they are no part of the backlog, never overdue, and only counted per queue for the
metrics (`audits`, read the same way as the backlog, from before the oldest still waiting).

A store holds weeks of results; the backlog is read from shortly before the oldest item still
waiting (`BacklogReader`), so the scan skips the row groups of answered history, and at most
every `decisions.review_backlog_seconds`, so a burst of decision rounds pays for it once.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta

import duckdb

from collector.decisions.state import MAX_EVIDENCE
from collector.targets import Target

# A result `r` still waiting for a person: no later revision of its run closed, and no label
# answers it (collector/review/labels.py).
WAITING = """NOT EXISTS (
          SELECT 1 FROM trajectories t
          WHERE t.closed_at >= $since AND t.trace_id = r.trace_id AND t.revision > r.revision)
      AND NOT EXISTS (
          SELECT 1 FROM results h
          WHERE h.source = 'human' AND h.origin = 'live' AND h.scope = 'trajectory'
            AND h.verdict IN ('pass', 'fail', 'not_applicable') AND h.evaluated_at >= $since
            AND h.trace_id = r.trace_id AND h.pack = r.pack AND h.rule_id = r.rule_id
            AND h.revision >= r.revision)"""

# Per pack and target: the items, the oldest, and those asked for at or before the pack's cutoff
# (now - review.sla; no cutoff, no overdue item) with the oldest overdue runs first. The owner is
# the one recorded with the pack version that asked (`rule_packs`), for packs no longer in force.
PENDING = f"""
WITH sla AS (
    SELECT unnest($packs::VARCHAR[]) AS pack, unnest($cutoffs::TIMESTAMP[]) AS cutoff
),
items AS (
    SELECT r.trace_id, r.pack, r.rule_id,
           coalesce(r.service_name, '') AS service, coalesce(r.agent_name, '') AS agent,
           coalesce(r.service_version, '') AS version,
           min(r.evaluated_at) AS asked_at, max(p.owner) AS owner
    FROM results r
    LEFT JOIN rule_packs p ON p.sha256 = r.pack_sha256
    WHERE r.origin = 'live' AND r.scope = 'trajectory' AND r.source IS NULL
      AND r.verdict = 'review' AND r.evaluated_at >= $since
      AND {WAITING}
    GROUP BY ALL
)
SELECT i.pack, i.service, i.agent, i.version, max(i.owner) AS owner,
       count(*) AS items, min(i.asked_at) AS oldest,
       count(*) FILTER (WHERE i.asked_at <= s.cutoff) AS overdue,
       max(i.asked_at) FILTER (WHERE i.asked_at <= s.cutoff) AS newest_overdue,
       (list(i.trace_id ORDER BY i.asked_at, i.trace_id)
            FILTER (WHERE i.asked_at <= s.cutoff))[1:{MAX_EVIDENCE}] AS traces,
       list(DISTINCT i.rule_id ORDER BY i.rule_id)
            FILTER (WHERE i.asked_at <= s.cutoff) AS rules
FROM items i LEFT JOIN sla s ON s.pack = i.pack
GROUP BY i.pack, i.service, i.agent, i.version
ORDER BY i.pack, i.service, i.agent, i.version
"""


# Per pack: the audit items no label answers yet, on runs no later revision replaced.
AUDITS = f"""
WITH items AS (
    SELECT r.trace_id, r.pack, r.rule_id, min(r.evaluated_at) AS asked_at, max(p.owner) AS owner
    FROM results r
    LEFT JOIN rule_packs p ON p.sha256 = r.pack_sha256
    WHERE r.origin = 'live' AND r.scope = 'trajectory' AND r.source IS NULL AND r.audit
      AND r.verdict IN ('pass', 'fail') AND r.evaluated_at >= $since
      AND {WAITING}
    GROUP BY ALL
)
SELECT pack, max(owner) AS owner, count(*) AS items, min(asked_at) AS oldest
FROM items GROUP BY pack ORDER BY pack
"""


@dataclass(frozen=True)
class Audits:
    """One pack's audit items that no label answers yet."""

    pack: str
    recorded_owner: str  # of the pack version that sampled them; "" when never recorded
    items: int
    oldest: datetime


def audits(cursor: duckdb.DuckDBPyConnection, since: datetime = datetime.min) -> list[Audits]:
    """Every pack's unanswered audit items, of those sampled from `since`."""
    cursor.execute(AUDITS, {"since": since})
    return [
        Audits(pack, owner or "", items, oldest) for pack, owner, items, oldest in cursor.fetchall()
    ]


@dataclass(frozen=True)
class Pending:
    """One pack's unanswered review items of one target."""

    pack: str
    target: Target
    recorded_owner: str  # of the pack version that asked; "" when it was never recorded
    items: int
    oldest: datetime  # when the longest-waiting item was asked for
    overdue: int = 0  # items past the pack's review.sla
    newest_overdue: datetime | None = None  # when the most recent of those was asked for
    traces: tuple[str, ...] = ()  # overdue items' runs, longest waiting first
    rules: tuple[str, ...] = ()  # rule ids of the overdue items


def pending(
    cursor: duckdb.DuckDBPyConnection,
    now: datetime,
    slas: Mapping[str, float],
    since: datetime = datetime.min,
) -> list[Pending]:
    """Every pack's unanswered review items per target, of those asked for from `since` (a
    label comes after what it answers, so only labels from then on count); items asked for more
    than `slas[pack]` seconds before `now` are overdue."""
    packs = sorted(slas)
    cutoffs = [now - timedelta(seconds=slas[p]) for p in packs]
    cursor.execute(PENDING, {"packs": packs, "cutoffs": cutoffs, "since": since})
    names = [d[0] for d in cursor.description]
    out = []
    for values in cursor.fetchall():
        row = dict(zip(names, values, strict=True))
        out.append(
            Pending(
                pack=row["pack"],
                target=Target(row["service"], row["agent"], row["version"]),
                recorded_owner=row["owner"] or "",
                items=row["items"],
                oldest=row["oldest"],
                overdue=row["overdue"],
                newest_overdue=row["newest_overdue"],
                traces=tuple(row["traces"] or ()),
                rules=tuple(row["rules"] or ()),
            )
        )
    return out


# A result is stamped when it is evaluated and committed a moment later (the writer gives up
# after STORE_TIMEOUT_SECONDS): a read from this long before the oldest item still waiting at
# the last read cannot miss one committed since.
LATE_COMMIT = timedelta(minutes=10)


class BacklogReader:
    """The backlog, read at most every `every` seconds (the rounds in between reuse the last
    read, unless the SLAs changed) and, after the first read, only from `LATE_COMMIT` before the
    oldest item then waiting: an item older than that was answered or replaced, for good."""

    def __init__(self, every: float) -> None:
        self.every = every
        self._since = datetime.min
        self._read: tuple[datetime, dict[str, float], list[Pending]] | None = None
        self._audit_since = datetime.min
        self._audits: tuple[datetime, list[Audits]] | None = None

    def read(
        self, cursor: duckdb.DuckDBPyConnection, now: datetime, slas: Mapping[str, float]
    ) -> list[Pending]:
        if self._read is not None:
            read_at, read_slas, found = self._read
            if read_slas == slas and 0 <= (now - read_at).total_seconds() < self.every:
                return found
        found = pending(cursor, now, slas, self._since)
        self._since = min([now, *(p.oldest for p in found)]) - LATE_COMMIT
        self._read = (now, dict(slas), found)
        return found

    def read_audits(self, cursor: duckdb.DuckDBPyConnection, now: datetime) -> list[Audits]:
        """The audit items per pack, at the same pace and with the same bound as `read`."""
        if self._audits is not None and 0 <= (now - self._audits[0]).total_seconds() < self.every:
            return self._audits[1]
        found = audits(cursor, self._audit_since)
        self._audit_since = min([now, *(a.oldest for a in found)]) - LATE_COMMIT
        self._audits = (now, found)
        return found


@dataclass(frozen=True)
class Queue:
    """A review queue (a pack's items, which its owner answers) as the metrics show it."""

    items: int  # REVIEW items, which the SLA bounds
    oldest: datetime | None  # of the REVIEW items; None when there is none
    sla: float | None  # the pack's review.sla in seconds, when in force with one
    audits: int = 0  # audit items waiting besides (never overdue)


def queues(
    found: list[Pending],
    owners: Mapping[str, str],
    slas: Mapping[str, float],
    audited: list[Audits] | None = None,
) -> dict[tuple[str, str], Queue]:
    """(owner, pack) -> its queue: every pack in force (`owners`, name -> owner; empty queues
    included) and every pack with items, its owner the one in force or else the recorded one."""
    out = {(owner, pack): Queue(0, None, slas.get(pack)) for pack, owner in owners.items()}
    for p in found:
        key = (owners.get(p.pack, p.recorded_owner), p.pack)
        q = out.get(key, Queue(0, None, slas.get(p.pack)))
        oldest = p.oldest if q.oldest is None else min(q.oldest, p.oldest)
        out[key] = Queue(q.items + p.items, oldest, q.sla, q.audits)
    for a in audited or []:
        key = (owners.get(a.pack, a.recorded_owner), a.pack)
        q = out.get(key, Queue(0, None, slas.get(a.pack)))
        out[key] = Queue(q.items, q.oldest, q.sla, q.audits + a.items)
    return out
