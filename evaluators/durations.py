"""The one duration grammar (`30s`, `5m`, `1h`, `7d`, a number of seconds) and the one way a
time is given (an ISO 8601 time, or a duration back from now), for packs and command lines.

It lives in `evaluators/` because packs use it and evaluators import nothing from `collector/`;
the command line takes it from here too, so a flag and a YAML key accept the same words.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Annotated

from pydantic import BeforeValidator, Field

UNIT_SECONDS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d|w)?\s*$")
DURATION_HINT = "a duration such as 60s, 5m, 1h or 7d"
TIME_HINT = "an ISO 8601 time (2025-06-01T12:00, UTC unless it says otherwise) or an age (30m, 7d)"


def parse_duration(value: object) -> float:
    """Seconds from `90s`, `15m`, `1h`, `7d`, `2w`, `250ms` or a plain number of seconds.

    Raises ValueError (what pydantic turns into a field error) on anything else, negative
    numbers included: no duration in Sextant runs backwards."""
    if isinstance(value, bool):
        raise ValueError(f"expected {DURATION_HINT}")
    if isinstance(value, int | float):
        if value < 0:
            raise ValueError("a duration is not negative")
        return float(value)
    match = DURATION.match(str(value))
    if not match:
        raise ValueError(f"expected {DURATION_HINT}, got {value!r}")
    return float(match.group(1)) * UNIT_SECONDS[match.group(2) or "s"]


# A pack key that takes a duration and is never zero (a window, a timeout, an SLA).
Seconds = Annotated[float, BeforeValidator(parse_duration), Field(gt=0)]


def duration_text(seconds: float) -> str:
    """Seconds in the grammar's largest whole unit: 2592000 is `30d`, 90 is `90s`."""
    for unit in ("w", "d", "h", "m", "s"):
        count = seconds / UNIT_SECONDS[unit]
        if count >= 1 and count == int(count):
            return f"{int(count)}{unit}"
    return f"{seconds:g}s"


def parse_time(text: str, now: datetime) -> datetime:
    """A moment as naive UTC (how the store keeps times): an ISO 8601 time, UTC when it names no
    offset, or a duration back from `now` (`6h` is six hours ago)."""
    if now.tzinfo is None:
        now = now.replace(tzinfo=UTC)
    try:
        moment = now - timedelta(seconds=parse_duration(text))
    except ValueError:
        try:
            moment = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
        except ValueError as exc:
            raise ValueError(f"{text!r}: expected {TIME_HINT}") from exc
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC).replace(tzinfo=None)
