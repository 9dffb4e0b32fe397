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
    """A generator whose `choice` and `randint` take one float draw each instead of rejecting
    and redrawing to be exactly uniform: `randint` at about three quarters of the standard
    one's cost, `choice` at about the same (timeit, a million calls). Uneven by at most 2**-53
    over ranges below 2**53, which no generated case notices; a wider range (a huge integer)
    is drawn as the standard one draws it, since one float has too few bits for it. The seeded
    rounds of both native differential tests (the interpreter's and the builder's) draw from
    it."""

    def choice(self, seq: Any) -> Any:
        return seq[int(self.random() * len(seq))]

    def randint(self, a: int, b: int) -> int:
        if b - a >= 1 << 53:
            return super().randint(a, b)
        return a + int(self.random() * (b - a + 1))
