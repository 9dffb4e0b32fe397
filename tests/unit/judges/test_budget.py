"""A pack's judge budget: sliding windows of calls and spend, and the judgement cache."""

from __future__ import annotations

from collector.judges.budget import Budget, JudgementCache
from evaluators.judge import Judgement, JudgeSettings

ENDPOINT = {"base_url": "http://127.0.0.1:9/v1", "model": "m"}


def test_calls_per_minute_slide() -> None:
    budget = Budget(JudgeSettings(endpoint=ENDPOINT, calls_per_minute=2))
    for at in (0.0, 10.0):
        assert budget.refused(at) is None
        budget.take(at)
    assert "calls_per_minute" in (budget.refused(59.0) or "")
    assert budget.refused(60.5) is None  # the first call left the window


def test_usd_per_hour_counts_what_was_spent() -> None:
    budget = Budget(JudgeSettings(endpoint=ENDPOINT, usd_per_hour=0.01))
    budget.spent(0.0, 0.006)
    assert budget.refused(1.0) is None
    budget.spent(1.0, 0.005)
    assert "usd_per_hour" in (budget.refused(2.0) or "")
    assert budget.refused(3600.5) is None


def test_the_cache_keeps_the_most_recently_used() -> None:
    cache = JudgementCache(2)
    one, two, three = (Judgement(s, "x", "") for s in (0.1, 0.2, 0.3))
    cache.put("a", one)
    cache.put("b", two)
    assert cache.get("a") is one  # now the most recent
    cache.put("c", three)
    assert cache.get("b") is None and cache.get("a") is one and cache.get("c") is three


def test_calls_in_flight_hold_their_estimated_cost() -> None:
    budget = Budget(JudgeSettings(endpoint=ENDPOINT, usd_per_hour=0.01))
    for _ in range(2):  # two calls planned at once, neither answered yet
        assert budget.refused(0.0, 0.004) is None
        budget.take(0.0, 0.004)
    assert "held by calls in flight" in (budget.refused(0.0, 0.004) or "")
    budget.spent(1.0, 0.001, reserved=0.004)  # one answered, cheaper than feared
    assert budget.refused(1.0, 0.004) is None
    assert budget.refused(1.0, 0.006) is not None  # 0.001 + 0.004 + 0.006 > 0.01
