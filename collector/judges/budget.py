"""A pack's judge budget: calls in any minute, USD in any hour (sliding windows), and a cache of
judgements by prompt hash so a run seen twice (a late span, a replica's replay) costs once."""

from __future__ import annotations

from collections import OrderedDict, deque
from dataclasses import dataclass, field

from evaluators.judge import Judgement, JudgeSettings

MINUTE, HOUR = 60.0, 3600.0


@dataclass
class Budget:
    settings: JudgeSettings
    calls: deque[float] = field(default_factory=deque)  # monotonic times of calls made
    spend: deque[tuple[float, float]] = field(default_factory=deque)  # (time, USD)

    def refused(self, now: float) -> str | None:
        """Why one more call is over budget now (the rule then reviews the run), or None."""
        while self.calls and self.calls[0] <= now - MINUTE:
            self.calls.popleft()
        while self.spend and self.spend[0][0] <= now - HOUR:
            self.spend.popleft()
        limit = self.settings.calls_per_minute
        if limit is not None and len(self.calls) >= limit:
            return f"{limit} judge calls in the last minute (calls_per_minute)"
        usd = self.settings.usd_per_hour
        if usd is not None and sum(cost for _, cost in self.spend) >= usd:
            return f"USD {usd:g} spent on judges in the last hour (usd_per_hour)"
        return None

    def take(self, now: float) -> None:
        self.calls.append(now)

    def spent(self, now: float, usd: float | None) -> None:
        if usd:
            self.spend.append((now, usd))


class JudgementCache:
    """Least recently used judgements by prompt hash (model and prompt together)."""

    def __init__(self, entries: int) -> None:
        self.entries = entries
        self._items: OrderedDict[str, Judgement] = OrderedDict()

    def get(self, key: str) -> Judgement | None:
        found = self._items.get(key)
        if found is not None:
            self._items.move_to_end(key)
        return found

    def put(self, key: str, judgement: Judgement) -> None:
        if not self.entries:
            return
        self._items[key] = judgement
        self._items.move_to_end(key)
        while len(self._items) > self.entries:
            self._items.popitem(last=False)
