"""Random choices for the differential fuzzers, at a fraction of the cost of building every
alternative to keep one (which was most of their time)."""

from __future__ import annotations

import random
from typing import Any


def pick(rng: random.Random, *options: Any) -> Any:
    """One of the options, each as likely; one given as a function is made only if picked."""
    chosen = options[int(rng.random() * len(options))]  # (rng.choice, at a third of its cost)
    return chosen() if callable(chosen) else chosen
