"""A pack's cost is paid on every trajectory, so what a pack may be is bounded, and a pack past
a bound is refused quickly with file and line, never after minutes of parsing or a crash."""

from __future__ import annotations

import time

import pytest

from evaluators.rulepack import MAX_RULES, RulePackError, load_text

HEAD = "name: p\nversion: '1'\nowner: sre\n"
RULE = "  - id: r{i}\n    type: presence\n    step: {{name: search}}\n    reason: r\n"


def refused(text: str) -> str:
    with pytest.raises(RulePackError) as caught:
        load_text(text, "p.yaml")
    [error] = caught.value.errors
    return error


def test_a_deeply_nested_pack_is_refused_at_once() -> None:
    started = time.process_time()  # CPU time: other processes on a busy machine do not count
    error = refused(HEAD + "rules: " + "[" * 100_000 + "]" * 100_000 + "\n")
    assert time.process_time() - started < 2
    assert error.startswith("p.yaml:4:") and "nest" in error


def test_a_5000_digit_integer_is_refused_with_its_line() -> None:
    error = refused(HEAD + "rules:\n" + RULE.format(i=0) + "    min_count: " + "9" * 5000 + "\n")
    assert error.startswith("p.yaml:9:") and "more than 100 digits" in error


def test_too_many_rules_are_refused() -> None:
    rules = "".join(RULE.format(i=i) for i in range(MAX_RULES + 1))
    error = refused(HEAD + "rules:\n" + rules)
    assert error.startswith("p.yaml:4: rules:") and f"more than {MAX_RULES}" in error
    ok = "".join(RULE.format(i=i) for i in range(MAX_RULES))
    assert len(load_text(HEAD + "rules:\n" + ok, "p.yaml").pack.rules) == MAX_RULES


def test_a_pack_over_a_megabyte_is_refused() -> None:
    comment = "# " + "x" * 1_100_000 + "\n"
    assert "larger than" in refused(HEAD + comment + "rules:\n" + RULE.format(i=0))
