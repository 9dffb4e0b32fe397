"""The example packs in rules/examples/ and the README's first rule load: what the README and
docs/ point people to must work."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from evaluators.rulepack import load_pack

ROOT = Path(__file__).parents[3]
EXAMPLES = sorted((ROOT / "rules" / "examples").glob("*.yaml"))


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_an_example_pack_loads(path: Path) -> None:
    pack = load_pack(path).pack
    assert pack.rules and pack.owner


def test_there_are_examples_of_every_layer_three_and_session_rule() -> None:
    types = {r.type for p in EXAMPLES for r in load_pack(p).pack.rules}
    expected = {"judge", "similarity", "evaluation", "flow", "retrieval", "mcp"}
    assert expected | {"approval_lifetime", "repeated_failures"} <= types


def test_the_readmes_first_rule_loads_as_the_readme_shows_it(tmp_path: Path) -> None:
    readme = (ROOT / "README.md").read_text()
    section = readme.split("## A first rule", 1)[1]
    block = re.search(r"```yaml\n(.*?)```", section, re.S)
    assert block, "the README's first rule has no YAML block"
    (tmp_path / "first.yaml").write_text(block.group(1))
    pack = load_pack(tmp_path / "first.yaml").pack
    assert (pack.name, [r.type for r in pack.rules]) == ("first-pack", ["absence", "budget"])
