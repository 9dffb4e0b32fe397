"""The `api_key` detector on keyword assignments: a key that is or ends with a secret's name,
holding a value that looks like a credential, is found; keys that only contain such a word, and
values that are placeholders, references or short words, are not. The default pack quarantines
any agent whose tool call the detector names, so a false hit stops a correct run."""

from __future__ import annotations

import orjson
import pytest

from evaluators.secrets import API_KEY, Scanner, found

LIVE = "sk_live_" + "51Hx9aQ2eZvKYlo2C8a7Rt4J"
RESTRICTED = "rk_live_" + "4eC39HqLyjWDarjtT1zdp7dc"
VALUE = "Zq8vN2wR7tY4uP1s"

BENIGN = [
    {"secretary": "Jane"},
    {"password_policy": "min12chars"},
    {"passwordless": "enabled"},
    {"reset_password_link": "https://acme.example/r/8f2k"},
    {"api_key_id": "key-ops-2024"},
    {"secretary_email_alias": "frontdesk-team"},
    {"password_min_length": "twelve-chars"},
    {"tokenizer": "cl100k_base_v2"},
    {"next_page_token": VALUE},
    {"payment_token": "tok_test_5521"},  # a tokenized card is meant for the tool
    {"pwd": "/srv/app/current"},
    {"password": "${DB_PASSWORD}"},
    {"password": "[REDACTED]"},
    {"client_secret": "changeme"},
    {"password": "hunter2"},  # too short to tell from a word
    {"db_password": "aaaabbbbcccc"},  # too repetitive
    {"secret": "see the vault entry"},  # prose
]
SECRETS = [
    {"password": "hunter2hunter2"},
    {"dbPassword": "Tr0ub4dor&3x"},
    {"client_secret": VALUE},
    {"x-api-key": VALUE},
    {"apiKey": VALUE},
    {"access_token": VALUE},
    {"password_policy": "min12chars", "password": VALUE},  # the second key of a line
    {"env": f"A=1\nPAYMENTS_SECRET_KEY={VALUE}\n"},  # .env text inside a JSON string
    {"config": orjson.dumps({"password": VALUE}).decode()},  # JSON inside a JSON string
    {"env": {"STRIPE_KEY": LIVE}},
    {"webhook_key": RESTRICTED},
]


def detected(value: object) -> bool:
    text = value if isinstance(value, str) else orjson.dumps(value).decode()
    direct = found("api_key", API_KEY, text)
    assert Scanner(["api_key"], {}).hits(text) == (["api_key"] if direct else [])
    return direct


@pytest.mark.parametrize("arguments", BENIGN, ids=lambda a: orjson.dumps(a).decode())
def test_keys_that_only_contain_a_secret_word_and_placeholder_values_pass(
    arguments: dict,
) -> None:
    assert not detected(arguments)


@pytest.mark.parametrize("arguments", SECRETS, ids=lambda a: orjson.dumps(a).decode())
def test_keys_named_for_a_secret_with_a_credential_value_are_found(arguments: dict) -> None:
    assert detected(arguments)


@pytest.mark.parametrize(
    "text",
    [
        f"STRIPE_SECRET_KEY={LIVE}",
        f"DATABASE_HOST=db.internal\nPAYMENTS_SECRET_KEY={VALUE}\nDEBUG=0\n",
        f"password: {VALUE}",
        f'client_secret := "{VALUE}"',
    ],
)
def test_config_text_with_a_secret_is_found(text: str) -> None:
    assert detected(text)


@pytest.mark.parametrize(
    "text",
    [
        "STRIPE_SECRET_KEY=${STRIPE_SECRET_KEY}\nsecret_rotation=true\nPASSWORD: required\n",
        "api_key = os.environ['API_KEY']",
        "secret_key: get_secret_key()",
        "password_reset_url: https://acme.example/reset",
    ],
)
def test_config_text_that_only_names_a_secret_passes(text: str) -> None:
    assert not detected(text)


# detect-secrets' BasicAuthDetector: a password in a URL. Its RE2 prefilter once spelled `\s`
# inside a character class as a class of its own, which RE2 (no nested classes) reads as a
# literal `[` and a required `]`: no URL ever reached the detector.
URL_CREDENTIALS = [
    {"dsn": f"postgres://admin:{VALUE}@db.internal:5432/app"},
    {"remote": "https://deploy:Tr0ub4dor3x@git.example.com/repo.git"},
    "curl -u x https://ops:Zx9vQ2mLp7@api.example.com/v1",
]


@pytest.mark.parametrize("arguments", URL_CREDENTIALS, ids=str)
def test_credentials_in_a_url_are_found(arguments: object) -> None:
    assert detected(arguments)
