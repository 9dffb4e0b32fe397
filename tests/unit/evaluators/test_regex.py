"""Pack regexes cannot freeze the collector: matching is linear in the text, and what RE2
cannot do in linear time is refused when the pack loads, with the pattern and the reason."""

from __future__ import annotations

import re
import time

import pytest
import re2

from evaluators.regex import OPTIONS, with_ascii_spaces
from evaluators.rulepack import RulePackError, load_text

CATASTROPHIC = "^(a+)+$"  # exponential under a backtracking engine
EVIL_TEXT = "a" * 5000 + "!"  # `re` would need longer than the universe for this
# Times below are this process's CPU time: other processes on a busy machine do not count.


def pack(rule: str) -> str:
    return f"name: p\nversion: '1'\nowner: sre\nrules:\n{rule}"


def test_a_catastrophic_pattern_runs_in_linear_time() -> None:
    loaded = load_text(
        pack(
            "  - id: q\n    type: tool_args\n    step: {name: search}\n"
            f"    args: {{q: {{regex: '{CATASTROPHIC}'}}}}\n    reason: bad_query\n"
        ),
        "p.yaml",
    ).pack
    matcher = loaded.rules[0].args["q"]
    started = time.process_time()
    assert matcher.check(EVIL_TEXT) is False
    assert matcher.check("aaaa") is True
    assert time.process_time() - started < 0.5


@pytest.mark.parametrize(
    ("pattern", "why"),
    [(r"(a)\1", "invalid escape sequence"), ("(?=a)b", "invalid perl operator")],
)
def test_backreferences_and_lookaround_are_refused_at_load(pattern: str, why: str) -> None:
    text = pack(
        f"  - id: n\n    type: presence\n    step: {{name_regex: '{pattern}'}}\n    reason: r\n"
    )
    with pytest.raises(RulePackError) as caught:
        load_text(text, "p.yaml")
    [error] = caught.value.errors
    assert error.startswith("p.yaml:") and "name_regex" in error
    assert why in error and "RE2" in error


def test_json_schema_patterns_are_linear_too() -> None:
    loaded = load_text(
        pack(
            "  - id: s\n    type: tool_args\n    step: {name: search}\n"
            f"    args: {{q: {{json_schema: {{type: string, pattern: '{CATASTROPHIC}'}}}}}}\n"
            "    reason: bad_query\n"
        ),
        "p.yaml",
    ).pack
    matcher = loaded.rules[0].args["q"]
    started = time.process_time()
    assert matcher.check(EVIL_TEXT) is False
    assert matcher.check("aa") is True
    assert time.process_time() - started < 0.5


@pytest.mark.parametrize(
    ("pattern", "texts"),
    [
        (r"a\sb", ["a b", "a\x0bb", "a\x1cb"]),
        (r"[^:\s]+:", ["x:", "[x]:"]),
        (r"x[]\s]y", ["x]y", "x y", "x\x1fy"]),
        (r"\\s", ["\\s"]),
    ],
)
def test_python_spaces_spelled_for_re2_match_what_re_matches(
    pattern: str, texts: list[str]
) -> None:
    """Inside a class too, where a class of its own would be a literal `[` to RE2."""
    ours = re2.compile(with_ascii_spaces(pattern), options=OPTIONS)
    theirs = re.compile(pattern)
    for text in [*texts, "", "ab", "a\tb", "[ ]", "a[b"]:
        assert bool(ours.search(text)) == bool(theirs.search(text)), text
