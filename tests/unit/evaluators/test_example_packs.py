"""The example packs in rules/examples/ load: what the README points people to must work."""

from __future__ import annotations

from pathlib import Path

import pytest

from evaluators.rulepack import load_pack

EXAMPLES = sorted((Path(__file__).parents[3] / "rules" / "examples").glob("*.yaml"))


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_an_example_pack_loads(path: Path) -> None:
    pack = load_pack(path).pack
    assert pack.rules and pack.owner


def test_there_are_examples_of_every_layer_three_and_session_rule() -> None:
    types = {r.type for p in EXAMPLES for r in load_pack(p).pack.rules}
    expected = {"judge", "similarity", "evaluation", "flow", "retrieval", "mcp"}
    assert expected | {"approval_lifetime", "repeated_failures"} <= types
