"""Who a request is: the proxy's header only when configured, a named token's holder, the
console login's name; a plain token is nobody in particular."""

from __future__ import annotations

import pytest
from aiohttp.test_utils import make_mocked_request

from collector.auth import BearerAuth
from collector.config import load_config
from collector.errors import ConfigError
from collector.review.identity import Identities

ANA, PLAIN = "ana-token-0123456789abcdef", "plain-token-0123456789abc"


def auth() -> BearerAuth:
    config = load_config(
        None, environ={}, overrides={"auth": {"tokens": [PLAIN, {"token": ANA, "name": "ana"}]}}
    ).auth
    return BearerAuth([t.get_secret_value() for t in config.secrets], config.names)


def who(identities: Identities, **headers: str) -> str:
    return identities.who(make_mocked_request("GET", "/api/v1/review/queue", headers=headers))


def test_a_named_token_names_its_holder_and_a_plain_one_nobody() -> None:
    identities = Identities(auth(), None)
    assert who(identities, Authorization=f"Bearer {ANA}") == "ana"
    assert who(identities, Authorization=f"Bearer {PLAIN}") == ""
    assert who(identities, Authorization="Bearer wrong-token-0123456789") == ""


def test_the_proxy_header_is_trusted_only_when_configured() -> None:
    plain = {"Authorization": f"Bearer {PLAIN}", "X-Forwarded-User": "mallory"}
    assert who(Identities(auth(), None), **plain) == ""
    proxied = Identities(auth(), "X-Forwarded-User")
    assert who(proxied, **plain) == "mallory"
    assert who(proxied, **{"X-Forwarded-User": "  "}) == ""  # no name: nobody


def test_the_console_login_names_who_signed_in() -> None:
    assert who(Identities(auth(), None, lambda request: "bo")) == "bo"


@pytest.mark.parametrize(
    ("entry", "said"),
    [
        ({"token": "short", "name": "ana"}, "a token needs at least 16"),
        ({"token": ANA}, "name: Field required"),
        ({"token": ANA, "name": "ana", "role": "admin"}, "role: Extra inputs are not permitted"),
        (42, "expected a token, or {token: ..., name: ...}"),
    ],
)
def test_a_bad_token_entry_is_refused_naming_what_is_wrong(entry: object, said: str) -> None:
    with pytest.raises(ConfigError) as refused:
        load_config(None, environ={}, overrides={"auth": {"tokens": [entry]}})
    assert "auth.tokens.0" in str(refused.value) and said in str(refused.value)
