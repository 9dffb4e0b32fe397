"""A session's row kept up to date from its new turns' own trajectory rows, with no earlier
turn read again: what the session stage does when no pack in force has a session rule.

Every column of a session's row follows from its previous row and its new turns: the totals
are sums, the target is the last turn's, the user the latest one given, and the session's clock
(collector/sessions/turns.py) needs only where the turns before began and ended to place a new
turn. Those are kept exact in memory; read back from a stored row they are known only to the
microsecond its `started_at` and `ended_at` keep, so when a turn would be placed within that
uncertainty the session is rebuilt from its stored turns instead (`None`), as it is for a
turn's late revision.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from collector.sessions.rows import TOTALS, stamp
from collector.sessions.turns import nanos

# How far a time read back from a stored timestamp may be from the one it was stamped from
# (float seconds to microseconds, and back).
SLACK = 5_000
# A run's columns the session stage reads, handed by the writer or read from the store.
RUN_COLUMNS = (
    "trace_id",
    "revision",
    "closed_at",
    "first_received_at",
    "conversation_id",
    "service_name",
    "agent_name",
    "service_version",
    "user_id",
    "start_time_unix_nano",
    "end_time_unix_nano",
    *TOTALS,
    "cost_usd",
    "unrepresentable",
)


@dataclass(slots=True)
class Running:
    """A session's stored row, and where its turns began and ended on its clock (nanoseconds);
    each is exact unless it was read back from the row's timestamps."""

    row: dict[str, Any]
    start: int
    end: int
    exact_start: bool = True
    exact_end: bool = True

    @classmethod
    def stored(cls, row: dict[str, Any]) -> Running:
        started, ended = row["started_at"], row["ended_at"]
        start, end = nanos(started) if started else 0, nanos(ended) if ended else 0
        return cls(row, start, end, exact_start=started is None, exact_end=ended is None)


def arrived(run: dict[str, Any]) -> tuple[int, int]:
    """The run's start and end moved, whole, to end no later than it arrived (closed)."""
    start, end = run["start_time_unix_nano"] or 0, run["end_time_unix_nano"] or 0
    at = nanos(run["closed_at"])
    return (start + at - end, at) if end > at else (start, end)


def unsure(at: int, mark: int, exact: bool) -> bool:
    """Whether comparing `at` with a mark read back from a timestamp could go either way (the
    mark's timestamp, stamped again, may not be what the true mark stamps)."""
    return not exact and abs(at - mark) < SLACK


def advanced(
    before: Running | None, key: tuple[str, str], runs: list[dict[str, Any]]
) -> Running | None:
    """The session after its new turns `runs` (in the order they arrived); None when its
    clock is not known exactly enough to place them."""
    fresh = before is None
    if before is None:
        row: dict[str, Any] = {
            "session_id": key[0],
            "session_service": key[1],
            "trace_ids": [],
            "started_at": None,
            "ended_at": None,
            **dict.fromkeys(TOTALS, 0),
            "cost_usd": 0.0,
            "user_id": None,
            "reopened": 0,
            "last_turn_at": runs[0]["closed_at"],
        }
        state = Running(row, 0, 0)
    else:
        row = {**before.row, "trace_ids": list(before.row["trace_ids"] or [])}
        if row["status"] == "closed":
            row["reopened"] += 1
        state = Running(row, before.start, before.end, before.exact_start, before.exact_end)
    for run in runs:
        start, end = arrived(run)
        if unsure(start, state.end, state.exact_end):
            return None
        if start < state.end:  # no earlier than every turn before it ended
            if not state.exact_end:
                return None
            start, end = state.end, end + state.end - start
        if unsure(start, state.start, state.exact_start) or unsure(end, state.end, state.exact_end):
            return None
        if fresh or start < state.start:
            row["started_at"], state.start, state.exact_start = stamp(start), start, True
        if fresh or end > state.end:
            row["ended_at"], state.end, state.exact_end = stamp(end), end, True
        fresh = False
        for total in TOTALS:
            row[total] = (row[total] or 0) + (run[total] or 0)
        row["cost_usd"] = (row["cost_usd"] or 0.0) + (run["cost_usd"] or 0.0)
        row["trace_ids"].append(run["trace_id"])
        row["user_id"] = run["user_id"] or row["user_id"]
        row["last_turn_at"] = max(row["last_turn_at"], run["closed_at"])
    last = runs[-1]
    row.update(
        status="open",
        closed_at=None,
        service_name=last["service_name"],
        agent_name=last["agent_name"],
        service_version=last["service_version"],
        turns=len(row["trace_ids"]),
        verdict="none",
        verdict_rules=None,
    )
    return state


def news(before: Running | None, runs: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], bool]:
    """The runs that are new turns of the session, in the order they arrived (first closed,
    then by start); and whether the session must be rebuilt from its stored turns: a turn it
    holds closed again, or a turn whose earlier revision it may have missed, or whose totals
    its row cannot hold."""
    known = set(before.row["trace_ids"] or ()) if before else set()
    last = before.row["last_turn_at"] if before else None
    new: dict[str, dict[str, Any]] = {}
    rebuild = False
    for run in runs:
        trace_id = run["trace_id"]
        if trace_id in known:
            rebuild = rebuild or run["closed_at"] > last
        elif trace_id in new:
            rebuild = rebuild or new[trace_id]["revision"] != run["revision"]
        else:
            new[trace_id] = run
            rebuild = rebuild or run["revision"] > 1 or bool(run["unrepresentable"])
    ordered = sorted(
        new.values(),
        key=lambda r: (r["closed_at"], r["start_time_unix_nano"] or 0, r["trace_id"]),
    )
    return ordered, rebuild
