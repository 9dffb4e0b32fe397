"""Credentials out of error text: each shape a server may quote back, and what stays."""

from __future__ import annotations

import pytest

from collector.redact import redact


@pytest.mark.parametrize(
    ("text", "secrets", "kept"),
    [
        ('{"Authorization": "Bearer abc.def-123"}', [], '{"Authorization": "[REDACTED]"}'),
        ("authorization: Basic dXNlcjpwYXNz", [], "authorization: [REDACTED]"),
        ("'api-key': 'k-9f8e7d'", [], "'api-key': '[REDACTED]'"),
        ("x-api-key=k-9f8e7d&x=1", [], "x-api-key=[REDACTED]&x=1"),
        ("token was bearer zyxw9876 (expired)", [], "token was bearer [REDACTED] (expired)"),
        ("key sk-proj-AbCdEfGhIjKlMnOpQrSt rejected", [], "key [REDACTED] rejected"),
        ("id AKIAABCDEFGHIJKLMNOP denied", [], "id [REDACTED] denied"),
        ("invalid key my-own-secret here", ["my-own-secret"], "invalid key [REDACTED] here"),
        ("no credentials in HTTP 500: internal", ["abc"], "no credentials in HTTP 500: internal"),
    ],
)
def test_redact(text: str, secrets: list[str], kept: str) -> None:
    assert redact(text, secrets) == kept
