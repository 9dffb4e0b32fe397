"""Waiting on a condition with a deadline, instead of sleeping and hoping."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")


def wait_for(predicate: Callable[[], Any], timeout: float = 10.0, interval: float = 0.02) -> Any:
    """Poll until `predicate` returns something truthy; fail with its last value at the deadline."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout}s (last value: {value!r})")
        time.sleep(interval)


def eventually(check: Callable[[], T], timeout: float = 10.0, interval: float = 0.02) -> T:
    """Run `check` until it passes its assertions, and return what it returns; at the deadline its
    last failure is the test's. For a state reached a moment after what the test saw (metrics are
    counted after the commit that made a trajectory visible): assert the state, not a first look."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return check()
        except AssertionError:
            if time.monotonic() > deadline:
                raise
        time.sleep(interval)
