"""Types of the keys that say who may reach the admin port: host names and bearer tokens."""

from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator, SecretStr

# A random token this long cannot be guessed, throttled or not; a short one can.
MIN_TOKEN_LENGTH = 16


def host_name(value: str) -> str:
    name = value.strip().lower().rstrip(".")
    if not name or any(c in name for c in "/:@ *"):
        raise ValueError(f"expected a host name without scheme, port or path, got {value!r}")
    return name


def long_enough(token: SecretStr) -> SecretStr:
    length = len(token.get_secret_value())
    if length < MIN_TOKEN_LENGTH:
        raise ValueError(
            f"{length} characters; a token needs at least {MIN_TOKEN_LENGTH}"
            " (e.g. `openssl rand -hex 24`)"
        )
    return token


HostName = Annotated[str, AfterValidator(host_name)]
Token = Annotated[SecretStr, AfterValidator(long_enough)]
