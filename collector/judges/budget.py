"""A pack's judge budget: calls in any minute, USD in any hour (sliding windows), and a cache of
judgements by prompt hash so a run seen twice (a late span, a replica's replay) costs once.

Spend is known only once a call has answered, so a call is planned against what was spent *and*
what the calls still in flight may cost: each reserves its estimated most (`estimate_usd`) when
planned and gives the reservation back for its real cost when it ends. Many calls planned in one
look can therefore never spend past `usd_per_hour` together."""

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
    reserved: float = 0.0  # USD the calls in flight may cost at most

    def refused(self, now: float, estimate: float | None = None) -> str | None:
        """Why one more call, which may cost `estimate` USD, is over budget now (the rule then
        reviews the run), or None."""
        while self.calls and self.calls[0] <= now - MINUTE:
            self.calls.popleft()
        while self.spend and self.spend[0][0] <= now - HOUR:
            self.spend.popleft()
        limit = self.settings.calls_per_minute
        if limit is not None and len(self.calls) >= limit:
            return f"{limit} judge calls in the last minute (calls_per_minute)"
        usd = self.settings.usd_per_hour
        if usd is None:
            return None
        spent = sum(cost for _, cost in self.spend)
        if spent + self.reserved + (estimate or 0.0) > usd or spent >= usd:
            return (
                f"USD {usd:g} an hour on judges (usd_per_hour): {spent:.4g} spent and"
                f" {self.reserved:.4g} held by calls in flight; this call may cost"
                f" {estimate or 0.0:.4g}"
            )
        return None

    def take(self, now: float, estimate: float | None = None) -> None:
        """A call planned: it counts as made, and holds its estimated cost until it ends."""
        self.calls.append(now)
        self.reserved += estimate or 0.0

    def spent(self, now: float, usd: float | None, reserved: float | None = None) -> None:
        """A call ended: its reservation given back, its real cost (if any) spent."""
        self.reserved = max(0.0, self.reserved - (reserved or 0.0))
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
