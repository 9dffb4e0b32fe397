"""A session rebuilt from its stored turns' trajectory rows when no pack in force has a session
rule: after a late revision of a turn it holds, or when its clock cannot be read exactly enough
from its row to place a new turn.

Its turns are in the order they arrived (`in_order`: those it held keep their order, a turn
retention deleted drops out, new ones follow by when they first closed), each placed on the
session's clock by when it first closed, and its totals are every stored turn's (its latest
revision's), whatever `max_turns`: no turn's steps are read. A session with a turn whose totals
its row cannot hold is left to be rebuilt from its loaded turns.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from collector.sessions.loaded import SESSIONS_OF, Key, in_order, is_news, rows_of
from collector.sessions.running import RUN_COLUMNS, Running, advanced

TURN_ROWS = f"SELECT {', '.join(RUN_COLUMNS)} FROM trajectories WHERE is_current AND trace_id IN ?"


def rebuilt(
    cursor: Any, turns: dict[Key, list[tuple[str, datetime]]], counts: dict[str, int]
) -> tuple[dict[Key, Running], dict[Key, list[tuple[str, datetime]]]]:
    """The sessions these runs (trace id, when it closed) change, rebuilt, counted in `counts`
    (opened, reopened, turns); and the runs of those left to be loaded."""
    ids = list({sid for sid, _ in turns})
    before = {
        (r["session_id"], r["session_service"]): r for r in rows_of(cursor, SESSIONS_OF, [ids])
    }
    fresh = {key: new for key, new in turns.items() if is_news(before.get(key), new)}
    if not fresh:
        return {}, {}
    ordered, arrived = in_order(cursor, fresh, before)
    every = [t for traces in ordered.values() for t in traces]
    stored = {r["trace_id"]: r for r in rows_of(cursor, TURN_ROWS, [every])}
    states, left = {}, {}
    for key, traces in ordered.items():
        runs = [{**stored[t], "closed_at": arrived[t]} for t in traces if t in stored]
        if not runs:
            continue
        state = None if any(r["unrepresentable"] for r in runs) else advanced(None, key, runs)
        if state is None:
            left[key] = fresh[key]
            continue
        prior = before.get(key)
        closed = [at for _, at in fresh[key]]
        state.row.update(
            reopened=prior["reopened"] + (prior["status"] == "closed") if prior else 0,
            last_turn_at=max([*closed, prior["last_turn_at"]] if prior else closed),
        )
        states[key] = state
        count(counts, prior, fresh[key])
    return states, left


def count(
    counts: dict[str, int], before: dict[str, Any] | None, new: list[tuple[str, datetime]]
) -> None:
    if before is None or before["status"] == "closed":
        counts["opened" if before is None else "reopened"] += 1
    known = set((before or {}).get("trace_ids") or ())
    counts["turns"] += len({t for t, _ in new} - known)
