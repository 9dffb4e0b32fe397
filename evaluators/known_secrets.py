"""Secrets as detect-secrets knows them: its provider token detectors (Stripe, AWS, GitHub,
GitLab, Slack, Twilio, SendGrid, private keys, credentials in URLs...) and its keyword detector
(`STRIPE_SECRET_KEY=...`, `"password": "..."`), with its own false-positive heuristics.

A maintained detector set follows new token formats as providers add them; a list written here
would not. The package's code does the matching: its patterns are only copied into the RE2 set
that tells, in one pass, whether a text could hold one (a necessary condition: each pattern,
less a trailing look-ahead RE2 cannot read, and each keyword).
"""

from __future__ import annotations

import re
from functools import cache, lru_cache
from typing import Any

from detect_secrets.filters import heuristic
from detect_secrets.plugins.base import RegexBasedDetector
from detect_secrets.plugins.keyword import (
    CONFIG_DENYLIST_REGEX_TO_GROUP,
    DENYLIST,
    KeywordDetector,
)

# The plugins whose every match is a secret by its format. Left out: the high-entropy strings
# and public IPs (not secrets by themselves), and the cloud plugins that are keyword rules (the
# keyword detector covers those).
TOKEN_PLUGINS = (
    "ArtifactoryDetector",
    "AWSKeyDetector",
    "AzureStorageKeyDetector",
    "BasicAuthDetector",
    "DiscordBotTokenDetector",
    "GitHubTokenDetector",
    "GitLabTokenDetector",
    "JwtTokenDetector",
    "MailchimpDetector",
    "NpmDetector",
    "OpenAIDetector",
    "PrivateKeyDetector",
    "PypiTokenDetector",
    "SendGridDetector",
    "SlackDetector",
    "SquareOAuthDetector",
    "StripeDetector",
    "TelegramBotTokenDetector",
    "TwilioKeyDetector",
)
KEYWORDS = re.compile("|".join(DENYLIST), re.IGNORECASE)
# RE2's `\s` is [\t\n\f\r ]; Python's also has \x0b and \x1c-\x1f.
ASCII_SPACE = r"[\t\n\x0b\x0c\r \x1c-\x1f]"
TRAILING_LOOKAHEAD = re.compile(r"\(\?!\\w\)$")
LONG_REPEAT = re.compile(r"\{(\d+),(\d+)\}")  # RE2 repeats at most 1000 times


@cache
def token_detectors() -> tuple[RegexBasedDetector, ...]:
    found = {cls.__name__: cls for cls in all_subclasses(RegexBasedDetector)}
    missing = [name for name in TOKEN_PLUGINS if name not in found]
    if missing:  # a renamed plugin must not drop a detector without a word
        raise ImportError(f"detect-secrets has no {', '.join(missing)}")
    return tuple(found[name]() for name in TOKEN_PLUGINS)


def all_subclasses(cls: type) -> list[type]:
    import detect_secrets.plugins  # noqa: F401 - the plugin modules register on import
    from detect_secrets.core.plugins.util import get_mapping_from_secret_type_to_class

    return list(get_mapping_from_secret_type_to_class().values())


def prefilters() -> list[str]:
    """RE2 patterns, one of which matches wherever `holds` may be true (ASCII text)."""
    out = []
    for detector in token_detectors():
        for regex in detector.denylist:
            pattern = TRAILING_LOOKAHEAD.sub("", regex.pattern).replace(r"\s", ASCII_SPACE)
            out.append(LONG_REPEAT.sub(unbounded, pattern))
    out.append("(?i)(?:" + "|".join(DENYLIST) + ")")
    return out


def unbounded(m: re.Match[str]) -> str:
    return f"{{{m[1]},}}" if int(m[2]) > 1000 else m[0]


@cache
def net() -> Any:
    """The token patterns as one RE2 set (`prefilters` less the keywords)."""
    import re2

    from evaluators.regex import OPTIONS

    patterns = re2.Set.SearchSet(OPTIONS)
    for source in prefilters()[:-1]:
        patterns.Add(source)
    patterns.Compile()
    return patterns


@cache
def shadow_char(c: str) -> str:
    """An ASCII stand-in that every class of the patterns takes as it takes `c`, or more: a
    space for a space, 0 for a digit, a for a word character, DEL (only negated classes) else."""
    if c.isspace():
        return " "
    if c.isdecimal():
        return "0"
    return "a" if c.isalnum() or c == "_" else "\x7f"


def might_hold(text: str) -> bool:
    """A cheap necessary condition of `holds`: most text holds no secret."""
    if KEYWORDS.search(text):
        return True
    shadow = text if text.isascii() else "".join(map(shadow_char, text))
    return net().Match(shadow) is not None


@lru_cache(maxsize=256)  # several secrets rules (packs) scan the same tool call's text
def holds(text: str) -> bool:
    """Whether detect-secrets finds a secret in the text."""
    if not might_hold(text):
        return False
    for detector in token_detectors():
        if any(True for _ in detector.analyze_string(text)):
            return True
    return KEYWORDS.search(text) is not None and keyword_secret(text)


KEYWORD = KeywordDetector()


def keyword_secret(text: str) -> bool:
    """A keyword assignment with a value that is not a placeholder, a reference or prose: in
    quotes anywhere (JSON), or unquoted in a `KEY=value` / `key: value` line (.env, YAML)."""
    for line in text.splitlines() or [text]:
        if not KEYWORDS.search(line):
            continue
        values: list[Any] = [*KEYWORD.analyze_string(line)]
        values += KEYWORD.analyze_string(line, CONFIG_DENYLIST_REGEX_TO_GROUP)
        if any(credential(str(v), line) for v in values):
            return True
    return False


def credential(value: str, line: str) -> bool:
    value = value.strip().strip("\"'")
    if not value or any(c.isspace() for c in value) or value.lower() in PLACEHOLDERS:
        return False
    return not (
        heuristic.is_templated_secret(value)
        or heuristic.is_prefixed_with_dollar_sign(value)
        or heuristic.is_sequential_string(value)
        or heuristic.is_potential_uuid(value)
        or heuristic.is_indirect_reference(line)
        or heuristic.is_not_alphanumeric_string(value)
    )


# values that say a setting has no secret in it
PLACEHOLDERS = frozenset({"true", "false", "none", "null", "nil", "yes", "no", "required"})
