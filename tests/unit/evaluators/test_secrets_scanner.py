"""The secrets rule's one-pass RE2 set against the detectors it stands for: over ASCII text the
set names every detector `found` finds (and only those), whatever the text; other text goes to
`found` itself. Captures of real tool calls and random near-misses are both checked."""

from __future__ import annotations

import random
import re

import pytest
import re2

from collector.assembler.build import build_trajectory
from collector.assembler.prices import PriceTable
from collector.normalize.wire import decode_request
from evaluators.regex import ASCII_SPACE, OPTIONS
from evaluators.secrets import DETECTORS, Scanner, ascii_form, found, texts
from tests.support.paths import TESTDATA

ALL = list(DETECTORS)
ASCII = [chr(c) for c in range(128)]


def reference(checks: dict[str, re.Pattern[str]], text: str) -> list[str]:
    """What the rule found before the set: every detector, one after the other."""
    return [name for name, pattern in checks.items() if found(name, pattern, text)]


def set_names(scanner: Scanner, text: str) -> set[str]:
    return {scanner.named[i] for i in scanner.set.Match(text) or ()}


@pytest.mark.parametrize(
    ("python", "in_re2"),
    [(r"\s", ASCII_SPACE), (r"\d", r"\d"), (r"\w", r"\w"), (r"(?i:[a-z_\-./+])", None)],
)
def test_each_class_means_the_same_on_ascii(python: str, in_re2: str | None) -> None:
    ours = re2.compile(in_re2 or python, options=OPTIONS)
    theirs = re.compile(python)
    assert [c for c in ASCII if ours.fullmatch(c)] == [c for c in ASCII if theirs.fullmatch(c)]


def test_word_boundaries_and_case_folding_mean_the_same_on_ascii() -> None:
    for pattern in (r"\ba", r"a\b", r"\bk", r"(?i:k)", r"(?i:s)", r"(?i:api[_-]?key)"):
        ours, theirs = re2.compile(pattern, options=OPTIONS), re.compile(pattern)
        for a in ASCII:
            for b in "aAkKsS_ 0-":
                for text in (a + b, b + a, a + "pi_key", "API-KE" + a):
                    assert bool(ours.search(text)) == bool(theirs.search(text)), (pattern, text)


FRAGMENTS = [
    *("sk-", "sk-proj-", "AKIA", "ghp_", "gho_", "ghu_", "ghs_", "ghr_", "ghx_", "xoxb-", "xoxq-"),
    *("AIza", "api_key", "API-KEY", "apikey", "Secret", "PASSWORD", "passwd", "Bearer", "token"),
    *(":", "=", '"', "'", " ", "\t", "\x0b", "\x0c", "\x1c", "\x1f", "\n", "\r", "-", "_", "."),
    *("/", "+", "@", "mira", "example.com", ".c", "x", "Z9", "4111", "1111", "1234", "5678"),
    *("0", "7", " 4", "-9", "abcdefghij", "ABCDEFGHIJKLMNOP", "0123456789", "{", "}", ",", "%"),
    *("a.b@ex.io", "x@y", "@ex-ample.co", "4111 1111 1111 1111", "4242-4242-4242-4242"),
    *("4111111111111111", "4111 1111 1111 1112", "378282246310005", " 1 2 3 4 5 6 7 8 9 0 1 2 3"),
]
UNICODE = ["é", "١٢٣", "\u212a", "\u017f", "\u00a0", "\u2028", "\u0131", "\u0130", "①", "ß"]


def random_text(rng: random.Random, fragments: list[str]) -> str:
    parts = []
    for _ in range(rng.randrange(1, 24)):
        fragment = rng.choice(fragments)
        parts.append(fragment * rng.choice((1, 1, 1, 3, 8)))
    return "".join(parts)


def test_random_near_misses_give_the_same_detectors() -> None:
    rng = random.Random(20240611)
    scanner = Scanner(ALL, {})
    checks = {name: DETECTORS[name] for name in ALL}
    hits = {name: 0 for name in ALL}
    for i in range(30_000):
        text = random_text(rng, FRAGMENTS if i % 4 else FRAGMENTS + UNICODE)
        expected = reference(checks, text)
        assert scanner.hits(text) == expected, text
        if text.isascii():
            # The set holds every pattern: it names at least what they find there (and, for
            # api_key, what detect-secrets' detectors might, which `found` then confirms).
            searched = {n for n in ALL if DETECTORS[n].search(text)}
            assert set_names(scanner, text) >= searched, text
        for name in expected:
            hits[name] += 1
    assert all(count > 100 for count in hits.values()), hits  # the fragments do reach matches


def test_a_text_scanned_again_gets_the_same_answer_from_what_was_kept() -> None:
    """The guard scans a run's earlier calls at each new one: a short text's answer is kept
    (more texts than are kept, so the kept ones are also let go), a long one scanned again."""
    rng = random.Random(20261203)
    scanner = Scanner(ALL, {})
    checks = {name: DETECTORS[name] for name in ALL}
    texts = [random_text(rng, FRAGMENTS) for _ in range(3_000)]
    texts.append("sk-" + "a1B2" * 700)  # past the length whose answer is kept
    for text in texts + texts[::-1]:
        got = scanner.hits(text)
        assert got == reference(checks, text), text
        got.append("changed by its caller")
    assert scanner.hits(texts[-2]) == reference(checks, texts[-2])


def capture_texts() -> list[str]:
    prices = PriceTable.load()
    out = []
    for path in sorted((TESTDATA / "otlp-captures").glob("*.otlp.json")):
        rows = decode_request("traces", "json", path.read_bytes(), 1 << 20).table.to_pylist()
        t = build_trajectory(rows[0]["trace_id"], rows, prices)
        out += [text for step in t.steps if step.is_tool_call for _, text in texts(step, "both")]
    return out


def test_real_tool_calls_give_the_same_detectors_also_with_secrets_planted() -> None:
    scanner = Scanner(ALL, {"ssn": r"\b\d{3}-\d{2}-\d{4}\b"})
    checks = {**{n: DETECTORS[n] for n in ALL}, "ssn": re2.compile(r"\b\d{3}-\d{2}-\d{4}\b")}
    planted = [
        "sk-abcdefghijklmnopqrstuvwxyz",
        "4111 1111 1111 1111",
        "mira@example.com",
        "123-45-6789",
        'password: "hunter2hunter2"',
    ]
    captured = capture_texts()
    assert len(captured) > 100
    for text in captured:
        for secret in ("", *planted):
            for variant in (text + secret, secret + text, text.replace(",", f",{secret}", 1)):
                assert scanner.hits(variant) == reference(checks, variant), variant


def test_a_pattern_named_like_a_detector_takes_its_place() -> None:
    scanner = Scanner(["api_key", "email"], {"api_key": "TOKEN-[0-9]+"})
    assert scanner.names == ["api_key", "email"]
    assert scanner.hits("TOKEN-42 sk-abcdefghijklmnopqrstuvwxyz") == ["api_key"]
    assert scanner.hits("sk-abcdefghijklmnopqrstuvwxyz") == []


def test_the_ascii_forms_are_the_detectors_but_for_spaces() -> None:
    for detector in DETECTORS.values():
        assert ascii_form(detector).replace(ASCII_SPACE, r"\s") == detector.pattern
        re2.compile(ascii_form(detector), options=OPTIONS)


def test_a_rule_without_detectors_scans_nothing() -> None:
    assert Scanner([], {}).hits("sk-abcdefghijklmnopqrstuvwxyz 4111 1111 1111 1111") == []
