"""The review desk: reviewers claim items (one person per item, for a while) and label them.

A claim is read and stored under one lock of the one process that writes the store, through
its writer: two reviewers asking at once are served one after the other, and the second sees
the first's claim committed, so it gets the next item. A claim ends at `review.claim_seconds`
or when its holder labels or skips the item.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any, Protocol

import pyarrow as pa

from collector.clock import Clock
from collector.config.evaluation import ReviewConfig
from collector.errors import PermanentError
from collector.evaluation.packs import PackSource, compiled
from collector.review import queue
from collector.review.labels import comment_of, label_row, label_table, verdict_of
from collector.review.queue import Filters, key_of
from collector.store.database import Database
from collector.store.tables import rows_table
from evaluators.base import Decision

Key = tuple[str, str, str]  # trace_id, pack, rule_id
LOOK_AHEAD = 500  # items read to find the next one nobody holds


class Anonymous(PermanentError):
    http_status = 403


class Held(PermanentError):
    http_status = 409


class Gone(PermanentError):
    http_status = 404


class Recorder(Protocol):
    def record(self, parts: dict[str, pa.Table]) -> None: ...


def position(row: dict[str, Any]) -> tuple[bool, datetime, str, str, str]:
    """Where an item stands in its queue (the queue's order: REVIEW items, then audits)."""
    audit = row["verdict"] != "review"
    return (audit, row["evaluated_at"], row["trace_id"], row["pack"], row["rule_id"])


def check_reviewer(reviewer: str) -> str:
    if not reviewer:
        raise Anonymous(
            "a review needs a named reviewer: give your token a name in auth.tokens"
            " ({token: ..., name: ...}) or sign in through the proxy that sets admin.user_header"
        )
    return reviewer


class ReviewDesk:
    """Claims and labels on the review items (collector/review/queue.py)."""

    def __init__(
        self,
        database: Database,
        writer: Recorder,
        packs: PackSource,
        config: ReviewConfig,
        clock: Clock,
    ) -> None:
        self.database = database
        self.writer = writer
        self.packs = packs
        self.claim_for = timedelta(seconds=config.claim_seconds)
        self.clock = clock
        self._lock = threading.Lock()

    def _read(self, query: Callable[..., Any], *args: Any) -> Any:
        return self.database.read(query, *args)

    def _store_claim(self, key: Key, reviewer: str, now: datetime, until: datetime) -> None:
        self.writer.record({"review_claims": claim_table(key, reviewer, now, until)})

    def claim_next(
        self,
        reviewer: str,
        filters: Filters,
        after: dict[str, Any] | None = None,
        backwards: bool = False,
    ) -> dict[str, Any] | None:
        """The item the reviewer holds among those `filters` select, else the first nobody
        else holds, now claimed. With `after` (an item, as `item` returns it): the first one
        past it in the queue's order (before it, `backwards`), and `after` is let go."""
        check_reviewer(reviewer)
        with self._lock:
            now = self.clock.now()
            rows = self._read(queue.items, filters, now, LOOK_AHEAD)
            free = [r for r in rows if r["claimed_by"] in (None, reviewer)]
            if after is None:
                mine = [r for r in free if r["claimed_by"] == reviewer]
                chosen = (mine or free or [None])[0]
            else:
                here = position(after)
                if backwards:
                    earlier = [r for r in free if position(r) < here]
                    chosen = earlier[-1] if earlier else None
                else:
                    chosen = next((r for r in free if position(r) > here), None)
            if chosen is None:
                return None
            if after is not None and after.get("claimed_by") == reviewer:
                self._store_claim(key_of(after), reviewer, now, now)  # skipped: let it go
            self._store_claim(key_of(chosen), reviewer, now, now + self.claim_for)
            return {**chosen, "claimed_by": reviewer, "claim_expires_at": now + self.claim_for}

    def claim(self, reviewer: str, key: Key) -> dict[str, Any]:
        """Claims this item (again, for its holder: the claim is renewed)."""
        check_reviewer(reviewer)
        with self._lock:
            now = self.clock.now()
            found = self._open(key, reviewer, now)
            self._store_claim(key, reviewer, now, now + self.claim_for)
            return {**found, "claimed_by": reviewer, "claim_expires_at": now + self.claim_for}

    def item(self, key: Key) -> dict[str, Any] | None:
        """The item while it is open, with who holds it."""
        return self._read(queue.item, key, self.clock.now())

    def label(self, reviewer: str, key: Key, verdict: str, comment: str | None) -> dict[str, Any]:
        """Stores the reviewer's label of an open item nobody else holds, and lets the item go;
        the label row as stored."""
        check_reviewer(reviewer)
        chosen, said = verdict_of(verdict), comment_of(comment)
        with self._lock:
            now = self.clock.now()
            found = self._open(key, reviewer, now)
            row = label_row(found, chosen, reviewer, said, now, self._on_fail(key[1], key[2]))
            release = claim_table(key, reviewer, now, now)
            self.writer.record({"results": label_table(row), "review_claims": release})
            return row

    def _open(self, key: Key, reviewer: str, now: datetime) -> dict[str, Any]:
        found = self._read(queue.item, key, now)
        if found is None:
            raise Gone(
                f"{key[1]}/{key[2]} on trace {key[0]} is not waiting for review: answered"
                " already, or not a REVIEW result of the run's current revision"
            )
        holder = found["claimed_by"]
        if holder not in (None, reviewer):
            until = found["claim_expires_at"]
            raise Held(f"{holder} is reviewing this item (claimed until {until:%H:%M:%S} UTC)")
        return found

    def _on_fail(self, pack_name: str, rule_id: str) -> Decision | None:
        """The rule's `on_fail` in the pack in force, None when neither is any longer."""
        for text in self.packs.snapshot():
            pack = compiled(text)
            if pack.name == pack_name:
                rule = next((r for r in pack.rules if r.id == rule_id), None)
                return rule.on_fail if rule is not None else None
        return None


def claim_table(key: Key, reviewer: str, at: datetime, until: datetime) -> pa.Table:
    trace_id, pack, rule_id = key
    row = {
        "trace_id": trace_id,
        "pack": pack,
        "rule_id": rule_id,
        "reviewer": reviewer,
        "claimed_at": at,
        "expires_at": until,
    }
    return rows_table("review_claims", [row])
