"""A session's turns on the session's own clock: in the order they arrived, none stamped after
it arrived nor before a turn that arrived earlier ended.

A turn's timestamps are its agent's clock; the order the collector closed turns in is ours.
Session rules compare turns by time (an approval before a write, an approval's age), so a turn
stamped a day ahead would otherwise become the session's latest turn for ever, and a turn that
arrives after a write was judged, stamped before it, would retroactively approve it. Each turn
is moved, whole (its steps keep their spacing), into those bounds.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

from evaluators.model import Trajectory


def nanos(at: datetime) -> int:
    """A stored naive-UTC time as Unix nanoseconds."""
    return int(at.replace(tzinfo=UTC).timestamp() * 1_000_000) * 1_000


def on_session_clock(turns: list[Trajectory], arrived: dict[str, datetime]) -> list[Trajectory]:
    """`turns` in arrival order, each shifted so that it ends no later than it arrived and
    starts no earlier than every turn before it ended (the later bound wins)."""
    out: list[Trajectory] = []
    floor = 0
    for turn in turns:
        shift = 0
        at = arrived.get(turn.trace_id)
        if at is not None and turn.end_time_unix_nano > nanos(at):
            shift = nanos(at) - turn.end_time_unix_nano
        if turn.start_time_unix_nano + shift < floor:
            shift = floor - turn.start_time_unix_nano
        moved = shifted(turn, shift) if shift else turn
        floor = max(floor, moved.end_time_unix_nano)
        out.append(moved)
    return out


def shifted(turn: Trajectory, by: int) -> Trajectory:
    return replace(
        turn,
        steps=[
            replace(
                s,
                start_time_unix_nano=s.start_time_unix_nano + by,
                end_time_unix_nano=s.end_time_unix_nano + by,
            )
            for s in turn.steps
        ],
        start_time_unix_nano=turn.start_time_unix_nano + by,
        end_time_unix_nano=turn.end_time_unix_nano + by,
    )
