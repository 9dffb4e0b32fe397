"""The one duration and time grammar: what a pack key and a command-line flag both accept."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from evaluators.durations import parse_duration, parse_time
from evaluators.policies import DecisionPolicy
from evaluators.window import CurrentWindow

NOW = datetime(2025, 6, 1, 12, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("30s", 30),
        ("5m", 300),
        ("1h", 3600),
        ("7d", 604800),
        ("2w", 1209600),
        ("250ms", 0.25),
        ("90", 90),
        (" 1.5h ", 5400),
        (45, 45),
        (0.5, 0.5),
    ],
)
def test_durations(text: object, seconds: float) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "5 minutes", "1y", "-5s", -1, True, "h"])
def test_not_durations(text: object) -> None:
    with pytest.raises(ValueError, match="duration"):
        parse_duration(text)


def test_packs_take_the_same_grammar() -> None:
    policy = DecisionPolicy.model_validate(
        {"id": "p", "decision": "REVIEW", "when": {}, "window": "2w", "for": 90}
    )
    assert (policy.window, policy.for_seconds) == (1209600, 90)
    assert CurrentWindow.model_validate({"last": "250ms"}).last == 0.25


def test_times_are_ages_or_iso_and_come_back_as_naive_utc() -> None:
    naive = NOW.replace(tzinfo=None)
    assert parse_time("6h", NOW) == naive - timedelta(hours=6)
    assert parse_time("90", NOW) == naive - timedelta(seconds=90)
    assert parse_time("2025-06-01T10:00", NOW) == datetime(2025, 6, 1, 10, 0)
    assert parse_time("2025-06-01T10:00Z", NOW) == datetime(2025, 6, 1, 10, 0)
    plus_two = datetime(2025, 6, 1, 12, 0, tzinfo=timezone(timedelta(hours=2)))
    assert parse_time(plus_two.isoformat(), NOW) == datetime(2025, 6, 1, 10, 0)
    assert parse_time("1d", naive) == naive - timedelta(days=1)
    with pytest.raises(ValueError, match="expected an ISO 8601 time"):
        parse_time("yesterday", NOW)
