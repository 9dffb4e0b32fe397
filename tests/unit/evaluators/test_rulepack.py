"""Rule packs: the shipped packs load; broken ones are refused with file, line, field and a hint."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from collector.config.sections import BUILTIN_RULES
from evaluators.rulepack import RulePackError, load_pack, load_text
from tests.support.paths import TESTDATA

BAD = TESTDATA / "rules" / "bad"

EXPECTED = {
    "unknown_key.yaml": [":11: rules[0](id=approval).then.colour: unknown key"],
    "unknown_type.yaml": [
        ":5: rules[0](id=mind-reading): unknown rule type; known types: presence, absence"
    ],
    "bad_values.yaml": [
        ":1: name: String should match pattern",
        ":7: rules[0](id=loop).reason: String should match pattern '^[a-z][a-z0-9_]*$'",
        ":8: rules[0](id=loop).max_same_call: Input should be greater than or equal to 1",
        ":12: rules[1](id=loop).step.name_regex: Value error, invalid regex '('",
    ],
    "missing_fields.yaml": [
        ":1: version: Field required",
        ":1: owner: Field required",
        ":3: rules[0](id=r1): every rule needs a `type`: one of presence",
    ],
    "broken_yaml.yaml": [":3: not valid YAML"],
    "absence_both.yaml": [
        ":5: rules[0](id=only-one): Value error, give exactly one of `step` or `allowed_tools`",
        ":10: rules[1](id=no-limit): Value error, set at least one max_* limit",
    ],
}


def test_the_shipped_packs_load() -> None:
    names = {load_pack(p).pack.name for p in sorted(BUILTIN_RULES.glob("*.yaml"))}
    assert names == {"default", "support-agent", "research-agent", "travel-agent"}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_broken_packs_report_every_error_with_its_line(name: str) -> None:
    with pytest.raises(RulePackError) as caught:
        load_pack(BAD / name)
    errors = caught.value.errors
    assert len(errors) == len(EXPECTED[name]), errors
    for error, expected in zip(errors, EXPECTED[name], strict=True):
        assert error.startswith(str(BAD / name)), error
        assert expected in error, error


def test_duplicate_rule_ids_are_refused() -> None:
    text = (BAD / "bad_values.yaml").read_text().replace("Support Pack", "support")
    text = text.replace("Loop-Budget", "loop_budget").replace(
        "max_same_call: 0", "max_same_call: 3"
    )
    text = text.replace('{name_regex: "("}', "{name: a}")
    with pytest.raises(RulePackError, match="rule id 'loop' is used twice"):
        load_text(text, "dup.yaml")


def test_validate_command_exit_codes() -> None:
    def run(*paths: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "collector.cli", "rules", "validate", *paths],
            capture_output=True,
            text=True,
            timeout=60,
        )

    good = run(str(BUILTIN_RULES))
    assert good.returncode == 0, good.stderr
    assert "support-agent.yaml: ok: support-agent 1.0.0 (4 rules" in good.stdout
    bad = run(str(BUILTIN_RULES), str(BAD / "unknown_key.yaml"))
    assert bad.returncode == 1
    assert "unknown_key.yaml:11: rules[0](id=approval).then.colour: unknown key" in bad.stderr
    # a pack that cannot be read is a usage error (2), not an invalid pack (1)
    assert run(str(Path("/nonexistent"))).returncode == 2
