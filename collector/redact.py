"""Credentials taken out of error text before it is stored or shown.

An error often quotes what a server answered, and a misbehaving server may answer with the
request it was sent: its `Authorization` header, the API key. Such text reaches tables that any
reader of the store sees (`judge_calls.error`, `results.message`), the console and the command
line, so every error that quotes a remote answer goes through `redact` first. It removes the
secrets it is told of (the configured key's value, wherever it appears), the values of
credential headers, bearer and basic tokens, and every secret the `api_key` detector of the
secrets rules finds (evaluators/known_secrets.py: provider token formats such as Stripe's
`sk_live_`, AWS, GitLab, JWTs; keyword assignments such as `"password": "..."`), with the
shapes of API keys it reads narrower.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from urllib.parse import urlsplit

REDACTED = "[REDACTED]"
MIN_SECRET_CHARS = 4  # shorter "secrets" would blank out ordinary words

# `Authorization: Bearer x`, `"api-key": "x"`, `x-api-key=x`: the header's value, quoted or not.
_HEADER = re.compile(
    r"""(?ix)
    (?P<name>\b(?:proxy-)?authorization|\bx-api-key|\bapi[-_]key|\bx-goog-api-key)
    (?P<sep>["']?\s*[:=]\s*["']?)
    (?P<value>(?:(?:bearer|basic|token)\s+)?[^\s"',;&}\]]+)
    """
)
_SCHEME = re.compile(r"(?i)\b(bearer|basic)\s+[A-Za-z0-9._~+/=-]{4,}")
# What detect-secrets' detectors (evaluators/known_secrets.py, which also redact) lack or read
# narrower: keys of any length after their prefix.
_SHAPES = re.compile(
    r"""(?x)
    \bsk-(?:proj-|ant-(?:api\d+-)?)?[A-Za-z0-9_-]{16,}   # OpenAI, Anthropic
    | \bAIza[0-9A-Za-z_-]{35}                            # Google API key
    | \bgh[pousr]_[A-Za-z0-9]{30,}                        # GitHub tokens
    | \bgithub_pat_[A-Za-z0-9_]{30,}
    | \bxox[abposr]-[A-Za-z0-9-]{10,}                     # Slack
    | \bhf_[A-Za-z0-9]{30,}                               # Hugging Face
    """
)
# `scheme://user:password@host`: the userinfo part of a URL quoted anywhere in the text.
_USERINFO = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)[^\s/?#@\"']+@")


def redact(text: str, secrets: Iterable[str | None] = ()) -> str:
    """`text` with every credential replaced by [REDACTED]."""
    # Imported here: the command line redacts errors, and should not load the detectors to start.
    from evaluators.known_secrets import secret_spans

    for secret in sorted({s for s in secrets if s and len(s) >= MIN_SECRET_CHARS}, key=len)[::-1]:
        text = text.replace(secret, REDACTED)
    text = _USERINFO.sub(lambda m: f"{m[1]}{REDACTED}@", text)
    text = _HEADER.sub(lambda m: f"{m['name']}{m['sep']}{REDACTED}", text)
    text = _SCHEME.sub(lambda m: f"{m[1]} {REDACTED}", text)
    text = _SHAPES.sub(REDACTED, text)
    return cut(text, secret_spans(text))


def cut(text: str, spans: list[tuple[int, int]]) -> str:
    """`text` with each span (overlapping ones as one) replaced by [REDACTED]."""
    out, at = [], 0
    for start, end in sorted(spans):
        if start < at:  # overlaps the one before: that one grows
            at = max(at, end)
            continue
        out += [text[at:start], REDACTED]
        at = end
    return "".join([*out, text[at:]])


CREDENTIAL_HEADERS = frozenset(
    {"authorization", "proxy-authorization", "api-key", "x-api-key", "x-goog-api-key"}
)


def header_secrets(headers: dict[str, str]) -> list[str]:
    """The credentials among request headers: each value, and its token without the scheme."""
    found = []
    for name, value in headers.items():
        if name.lower() in CREDENTIAL_HEADERS and value:
            found += [value, value.split(" ", 1)[-1]]
    return found


def shown_url(url: str) -> str:
    """A URL as errors show it: scheme://host:port only. The rest may be the credential itself
    (a Slack, Discord or Teams webhook's path, a `?token=` query, `user:password@`)."""
    try:
        parts = urlsplit(url if "://" in url else f"http://{url}")
        host, port = parts.hostname, parts.port
    except ValueError:
        return "(an invalid URL)"
    if not host:
        return "(an invalid URL)"
    host = f"[{host}]" if ":" in host else host
    port = port or {"http": 80, "https": 443, "ws": 80, "wss": 443}.get(parts.scheme)
    return f"{parts.scheme}://{host}" + (f":{port}" if port else "")


def url_secrets(url: str) -> list[str]:
    """The parts of a URL `shown_url` leaves out, as secrets for `redact` (an error from an HTTP
    library may quote the whole URL)."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return [url]
    return [url, parts.path, parts.query, parts.netloc.rpartition("@")[0]]
