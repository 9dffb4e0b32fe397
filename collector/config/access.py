"""Types of the keys that say who may reach the admin port: host names and bearer tokens."""

from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator, SecretStr

# A random token this long cannot be guessed, throttled or not; a short one can.
MIN_TOKEN_LENGTH = 16
MAX_NAME_LENGTH = 100


def host_name(host: str) -> str:
    """The name in a Host header, without port, brackets or a final dot, lower-cased: how
    admin.allowed_hosts and the Host check both compare names."""
    host = host.strip().lower()
    if host.startswith("["):
        return host[1 : host.find("]")] if "]" in host else host
    name, sep, port = host.rpartition(":")
    if sep and port.isdigit():
        host = name
    return host.rstrip(".")


def allowed_host_name(value: str) -> str:
    """An admin.allowed_hosts entry: a bare name, compared as `host_name` gives it."""
    if any(c in value.strip() for c in "/:@ *[]") or not host_name(value):
        raise ValueError(f"expected a host name without scheme, port or path, got {value!r}")
    return host_name(value)


def long_enough(token: SecretStr) -> SecretStr:
    length = len(token.get_secret_value())
    if length < MIN_TOKEN_LENGTH:
        raise ValueError(
            f"{length} characters; a token needs at least {MIN_TOKEN_LENGTH}"
            " (e.g. `openssl rand -hex 24`)"
        )
    return token


def header_name(value: str) -> str:
    """An HTTP header name (RFC 9110 token characters), as configured."""
    if not value or not all(c.isascii() and (c.isalnum() or c in "!#$%&'*+-.^_`|~") for c in value):
        raise ValueError(f"expected an HTTP header name such as X-Forwarded-User, got {value!r}")
    return value


def reviewer_name(value: str) -> str:
    """A reviewer's name as labels store it: printable, without surrounding spaces."""
    value = value.strip()
    if not 1 <= len(value) <= MAX_NAME_LENGTH or not value.isprintable():
        raise ValueError(f"a name is 1 to {MAX_NAME_LENGTH} printable characters, got {value!r}")
    return value


HostName = Annotated[str, AfterValidator(allowed_host_name)]
HeaderName = Annotated[str, AfterValidator(header_name)]
ReviewerName = Annotated[str, AfterValidator(reviewer_name)]
Token = Annotated[SecretStr, AfterValidator(long_enough)]
