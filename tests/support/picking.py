"""Random choices for the differential fuzzers, at a fraction of the cost of building every
alternative to keep one (which was most of their time)."""

from __future__ import annotations

import random
from typing import Any


def pick(rng: random.Random, *options: Any) -> Any:
    """One of the options, each as likely; one given as a function is made only if picked."""
    chosen = options[int(rng.random() * len(options))]  # (rng.choice, at a third of its cost)
    return chosen() if callable(chosen) else chosen


class QuickRandom(random.Random):
    """A generator whose `choice` and `randint` take one float draw each: at about a quarter of
    the cost of the standard ones, which reject and redraw to be exactly uniform. Uneven by at
    most 2**-53 over ranges far below 2**53 (every one a fuzzer asks for), which no generated
    case notices, and the fuzzers' runs are most of their time in these two calls."""

    def choice(self, seq: Any) -> Any:
        return seq[int(self.random() * len(seq))]

    def randint(self, a: int, b: int) -> int:
        return a + int(self.random() * (b - a + 1))
