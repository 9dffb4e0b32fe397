"""Secrets as detect-secrets knows them: its provider token detectors (Stripe, AWS, GitHub,
GitLab, Slack, Twilio, SendGrid, private keys, credentials in URLs...), and keyword assignments
(`STRIPE_SECRET_KEY=...`, `"password": "..."`) judged with its false-positive heuristics.

A maintained detector set follows new token formats as providers add them; a list written here
would not. The package's code does the matching: its patterns are only copied into the RE2 set
that tells, in one pass, whether a text could hold one (a necessary condition: each pattern,
less a trailing look-ahead RE2 cannot read, and each keyword).

Its keyword detector is not used: it takes a keyword anywhere inside a key (`secretary`,
`password_policy`, `api_key_id`) with a value of any length, and a secrets rule fails (the
default pack quarantines) on what it finds. Here the key must be the keyword or end with it
(`db_password`, `clientSecret`, `STRIPE_SECRET_KEY`, `access_token`), and the value must look
like a credential: long enough, varied enough, not a placeholder, reference, path or prose.
"""

from __future__ import annotations

import math
import re
import string
from collections import Counter
from collections.abc import Iterator
from functools import cache, lru_cache
from typing import Any

import re2
from detect_secrets.filters import heuristic
from detect_secrets.plugins.base import RegexBasedDetector

from evaluators.regex import OPTIONS, with_ascii_spaces

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
# What a secret's key ends with, separators and case aside: the keyword alone or after `_`
# (`pwd` but not `cwd`), or `password` after anything (`dbpassword`). Tokens only of the kinds
# that grant access: a `payment_token` or a `page_token` is meant to be passed to a tool.
SECRET_KEY = re.compile(
    r"(?:password|passwd|passphrase"
    r"|(?:^|_)(?:pwd|secret|secret_?key|api_?key|contrase[ñn]a"
    r"|(?:access|refresh|auth|api|bearer|bot|session|oauth|private|secret)_?token"
    r"|(?:private|auth|access|client|service|account|db|database)_?key"
    r"|(?:db|database|key)_?pass))$"
)
# A necessary condition of SECRET_KEY on the raw key (any case, any separators).
KEY_WORDS = (
    r"password|passwd|passphrase|pwd|secret|token|contrase(?:ñ|n)a"
    r"|(?:api|private|auth|access|client|service|account|db|database)[_.-]*key"
    r"|(?:db|database|key)[_.-]*pass"
)
KEYWORDS = re.compile(KEY_WORDS, re.IGNORECASE)
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
            pattern = with_ascii_spaces(TRAILING_LOOKAHEAD.sub("", regex.pattern))
            out.append(LONG_REPEAT.sub(unbounded, pattern))
    out.append(f"(?i)(?:{KEY_WORDS})")
    return out


def unbounded(m: re.Match[str]) -> str:
    return f"{{{m[1]},}}" if int(m[2]) > 1000 else m[0]


@cache
def net() -> Any:
    """The token patterns as one RE2 set (`prefilters` less the keywords)."""
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


# `"key": "value"`, `KEY=value`, `key: value`, `key := "value"`, `key => 'value'`: the whole
# key (not the tail of a longer one) and its value, quoted (JSON, code; escaped quotes too, as in
# JSON inside a JSON string) or not (.env, YAML). A value may hold assignments itself (JSON or
# .env text inside a JSON string): the next search starts after the key, not after the value.
ASSIGNMENT = re.compile(
    r"""(?x)
    (?:(?<=\\[nrt])|(?<![\w.\\-]))(?P<key>[^\W\d][\w.-]*)  # after `\n` in escaped text too
    [\\"'\]]{0,3}\s*(?::=|=>|[:=])\s*
    (?:
        (?P<escaped>\\)?"(?P<dq>(?:[^"\\\n]|\\.)*?)(?(escaped)\\)"
      | '(?P<sq>[^'\n]*)'
      | `(?P<bq>[^`\n]*)`
      | (?P<bare>[^\s"'`,;}\\]+)
    )
    """
)
CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")
NOT_WORD = re.compile(r"[\W_]+")
MIN_VALUE_CHARS = 8
MIN_ENTROPY = 2.5  # bits per character: `hunter2hunter2` 2.8, `aaaabbbb` 1.0


def keyword_secret(text: str) -> bool:
    """A key that names a secret, assigned a value that looks like one."""
    return next(keyword_values(text), None) is not None


def keyword_values(text: str) -> Iterator[tuple[int, int]]:
    """Where the value of each such assignment is in the text."""
    m = ASSIGNMENT.search(text)
    while m:
        if secret_key(m["key"]):
            group = next(g for g in ("dq", "sq", "bq", "bare") if m[g] is not None)
            if credential(m[group], bare=group == "bare"):
                yield m.span(group)
        m = ASSIGNMENT.search(text, m.end("key"))


TOKEN_CHARS = frozenset(string.ascii_letters + string.digits + "_-")
TOKEN_TAIL = re.compile(r"[A-Za-z0-9_-]*")


def secret_spans(text: str) -> list[tuple[int, int]]:
    """Where the secrets `holds` finds are in the text, to take them out: each token match
    whole, carried on to the end of the token (a longer Stripe key than the format's 24
    characters), and each keyword assignment's value."""
    if not might_hold(text):
        return []
    spans = []
    for detector in token_detectors():
        for regex in detector.denylist:
            for m in regex.finditer(text):
                end = m.end()
                tail = TOKEN_TAIL.match(text, end)
                if end > m.start() and text[end - 1] in TOKEN_CHARS and tail:
                    end = tail.end()
                spans.append((m.start(), end))
    if KEYWORDS.search(text):
        spans += keyword_values(text)
    return spans


def secret_key(key: str) -> bool:
    """`key` is a secret's name or ends with one: `clientSecret` → `client_secret`."""
    words = NOT_WORD.sub("_", CAMEL.sub("_", key).lower()).strip("_")
    return SECRET_KEY.search(words) is not None


def credential(value: str, bare: bool = False) -> bool:
    """Not a placeholder, a reference (`${X}`, `$X`, `get_key()`, `env['X']`), a path or a
    URL (credentials in a URL are BasicAuthDetector's), prose, or a short or repetitive word."""
    lower = value.lower()
    if (
        len(value) < MIN_VALUE_CHARS
        or any(c.isspace() for c in value)
        or lower in PLACEHOLDERS
        or any(word in lower for word in PLACEHOLDER_PARTS)
        or value.startswith(("/", "./", "~/"))
        or "://" in value
        or (bare and any(c in value for c in "(["))
        or entropy(value) < MIN_ENTROPY
    ):
        return False
    return not (
        heuristic.is_templated_secret(value)
        or heuristic.is_prefixed_with_dollar_sign(value)
        or heuristic.is_sequential_string(value)
        or heuristic.is_potential_uuid(value)
        or heuristic.is_not_alphanumeric_string(value)
    )


def entropy(value: str) -> float:
    """Shannon entropy in bits per character."""
    n = len(value)
    return -sum(c / n * math.log2(c / n) for c in Counter(value).values())


# values that say a setting has no secret in it
PLACEHOLDERS = frozenset(
    {
        *("true", "false", "none", "null", "nil", "yes", "no", "required", "optional"),
        *("enabled", "disabled", "undefined", "notset", "not_set", "default", "password"),
        *("secret", "changeme", "change_me", "change-me", "hidden", "masked"),
    }
)
PLACEHOLDER_PARTS = ("redacted", "placeholder", "xxxx", "****", "your_", "your-", "<your")
