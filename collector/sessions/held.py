"""Recently made sessions' turns, kept in memory for the runtime guard.

The stage puts each session's turns when it loads them to run its session rules (on the
session's clock, as the rules read them); the guard reads a session not kept here from the
store once (`read_turns` in collector/sessions/loaded.py) and offers it, kept until the stage
makes the session again. A guard call then asks the session rules without a query.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from evaluators.model import Trajectory

Key = tuple[str, str]  # (session id, its service, or "*" across services)


@dataclass(frozen=True)
class SessionTurns:
    """A session's turns as the stage made them: every turn's trace in order, and the latest
    (at most `sessions.max_turns`) built, on the session's clock."""

    traces: tuple[str, ...]
    turns: list[Trajectory]
    # how each pack's rule reads these turns (the guard's, kept with the turns they read)
    read_by: dict[Any, Any] = field(default_factory=dict, compare=False, repr=False)

    @property
    def truncated(self) -> bool:
        return len(self.traces) > len(self.turns)


class HeldSessions:
    """A bounded map of session key -> its turns, the least recently used let go."""

    def __init__(self, max_sessions: int = 0) -> None:
        self.max_sessions = max_sessions  # none until a guard asks for them (`keep`)
        self._held: OrderedDict[Key, SessionTurns] = OrderedDict()
        self._lock = threading.Lock()

    def keep(self, max_sessions: int) -> None:
        """Keep this many sessions' turns from now on (the guard that reads them says how
        many; without one, none are kept)."""
        with self._lock:
            self.max_sessions = max_sessions

    def put(self, key: Key, turns: SessionTurns) -> None:
        """The stage made the session: these are its turns now."""
        with self._lock:
            self._keep(key, turns)

    def offer(self, key: Key, turns: SessionTurns) -> None:
        """Turns read from the store: kept unless the stage made the session meanwhile (what
        it put is newer than a read that started before)."""
        with self._lock:
            if key not in self._held:
                self._keep(key, turns)

    def drop(self, keys: Iterable[Key]) -> None:
        """The stage made these sessions without reading their turns (no pack has session
        rules): what is kept of them is out of date."""
        with self._lock:
            for key in keys:
                self._held.pop(key, None)

    def get(self, key: Key) -> SessionTurns | None:
        with self._lock:
            found = self._held.get(key)
            if found is not None:
                self._held.move_to_end(key)
            return found

    def _keep(self, key: Key, turns: SessionTurns) -> None:
        self._held[key] = turns
        self._held.move_to_end(key)
        while len(self._held) > self.max_sessions:
            self._held.popitem(last=False)
