"""A reading taken at most every so often, the last one answered in between."""

from __future__ import annotations

import time
from collections.abc import Callable


class Sampled:
    """`read()` at most every `seconds`: for a value asked far more often than it changes
    whose reading costs (ingest asks the assembly lag before every trace export, and reading
    it takes the assembler's lock and walks its open traces)."""

    def __init__(self, read: Callable[[], float], seconds: float) -> None:
        self.read, self.seconds = read, seconds
        self._value, self._at = 0.0, -seconds

    def __call__(self) -> float:
        now = time.monotonic()
        if now - self._at >= self.seconds:
            self._at, self._value = now, self.read()
        return self._value
