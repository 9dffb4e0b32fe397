"""The native decoder agrees with the reference decoder (protobuf's parse and the Python
normalization it replaced) on random GenAI-shaped requests, in protobuf and in both OTLP/JSON
integer dialects, and on byte mutations of them: the same acceptance, counts and columns."""

from __future__ import annotations

import random

import pytest

from tests.fuzz.differential import differences
from tests.fuzz.otlp_requests import LIMIT, mutate, random_logs, random_traces, to_otlp_json

SEEDS = range(400)
GENERATORS = {"traces": random_traces, "logs": random_logs}


def encodings(message: object) -> dict[str, bytes]:
    return {
        "protobuf": message.SerializeToString(),  # type: ignore[attr-defined]
        "json": to_otlp_json(message, numbers=False),
        "json-numbers": to_otlp_json(message, numbers=True),
    }


@pytest.mark.parametrize("signal", sorted(GENERATORS))
def test_random_requests_decode_alike(signal: str) -> None:
    failures = []
    for seed in SEEDS:
        message = GENERATORS[signal](random.Random(seed))
        for name, data in encodings(message).items():
            encoding = "protobuf" if name == "protobuf" else "json"
            found = differences(signal, encoding, data, LIMIT)
            if found:
                failures.append(f"seed {seed} {name}: {found[:3]}")
    assert not failures, "\n".join(failures[:10])


@pytest.mark.parametrize("signal", sorted(GENERATORS))
def test_mutated_requests_are_accepted_or_refused_alike(signal: str) -> None:
    failures = []
    for seed in SEEDS:
        rng = random.Random(seed)
        message = GENERATORS[signal](rng)
        for name, data in encodings(message).items():
            encoding = "protobuf" if name == "protobuf" else "json"
            for _ in range(5):
                mutated = mutate(rng, data)
                found = differences(signal, encoding, mutated, LIMIT)
                if found:
                    failures.append(f"seed {seed} {name} {mutated[:80]!r}: {found[:3]}")
    assert not failures, "\n".join(failures[:10])
