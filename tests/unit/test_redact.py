"""Credentials out of error text: each shape a server may quote back, and what stays."""

from __future__ import annotations

import pytest

from collector.alerts.channels import post
from collector.redact import redact, shown_url


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


def test_an_alert_receivers_echo_of_the_request_is_stored_without_its_credentials() -> None:
    import json
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    from collector.alerts.channels import post

    class Echo(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = json.dumps({"seen": dict(self.headers.items())}).encode()
            self.send_response(500)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Echo)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/hook"
        headers = {"Content-Type": "application/json", "Authorization": "Bearer tok-5f1e9a77c3"}
        delivery = post(url, b"{}", headers, timeout=10)
    finally:
        server.shutdown()
    assert not delivery.ok and delivery.retry and delivery.http_status == 500
    assert delivery.error is not None and "HTTP 500" in delivery.error
    assert "5f1e9a" not in delivery.error


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("https://hooks.slack.com/services/T0/B0/Xs3cr3tXs3cr3t", "https://hooks.slack.com:443"),
        ("https://user:p4ssw0rd@judge.example:8443/v1?token=t0k3n", "https://judge.example:8443"),
        ("http://[::1]:9000/hook?token=t0k3n", "http://[::1]:9000"),
        ("collector.internal:4318", "http://collector.internal:4318"),
    ],
)
def test_errors_show_a_url_as_its_origin_only(url: str, shown: str) -> None:
    assert shown_url(url) == shown


def test_userinfo_in_a_quoted_url_is_redacted() -> None:
    text = "HTTP 500 from https://alice:p4ssw0rd@judge.example/v1: see http://h/x"
    assert redact(text) == "HTTP 500 from https://[REDACTED]@judge.example/v1: see http://h/x"


def test_an_unreachable_webhook_is_stored_without_the_credential_in_its_path() -> None:
    url = "http://127.0.0.1:1/services/T0000/B0000/Xs3cr3tXs3cr3tXs3cr3t?token=t0k3nt0k3n"
    delivery = post(url, b"{}", {}, timeout=5)
    assert not delivery.ok and delivery.error and "cannot reach" in delivery.error
    assert "127.0.0.1:1" in delivery.error
    assert "Xs3cr3t" not in delivery.error and "t0k3n" not in delivery.error


LIVE = "sk_live_" + "51Hx9aQ2eZvKYlo2C8a7Rt4J"
RESTRICTED = "rk_live_" + "4eC39HqLyjWDarjtT1zdp7dc"


@pytest.mark.parametrize(
    ("text", "kept"),
    [
        (f"Invalid API Key provided: {LIVE}", "Invalid API Key provided: [REDACTED]"),
        (f'{{"key": "{RESTRICTED}"}} rejected', '{"key": "[REDACTED]"} rejected'),
        # a longer key than the format's 24 characters goes whole
        (f"key {LIVE}Zx81kQ-tail expired", "key [REDACTED] expired"),
        (f"echo: STRIPE_SECRET_KEY={LIVE}", "echo: STRIPE_SECRET_KEY=[REDACTED]"),
        ('echo: {"db_password": "Tr0ub4dor&3x"}', 'echo: {"db_password": "[REDACTED]"}'),
        ("echo: glpat-AbCdEfGhIjKlMnOpQrSt12 used", "echo: [REDACTED] used"),
        ('{"password_policy": "min12chars", "passwordless": "enabled"}', None),
    ],
)
def test_what_the_secrets_rule_finds_is_redacted(text: str, kept: str | None) -> None:
    """Whatever the `api_key` detector of the secrets rules calls a secret, redaction takes out."""
    assert redact(text) == (text if kept is None else kept)
