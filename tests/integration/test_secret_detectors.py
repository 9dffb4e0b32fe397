"""The shipped `no-secrets-in-tools` rule on runs the real OTel SDK sends: Stripe keys and
`*_SECRET_KEY=` assignments (detect-secrets' detectors) are found in tool calls, the key never
shown; settings that only name a secret, and keys that only contain a secret's name, are not."""

from __future__ import annotations

import pytest
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter

from tests.support.admin import trajectory
from tests.support.agents import AgentScript, provider_for, trace_id_of
from tests.support.server import RunningServer

LIVE = "sk_live_" + "51Hx9aQ2eZvKYlo2C8a7Rt4J"  # Stripe's format: 24 characters after the prefix
RESTRICTED = "rk_live_" + "4eC39HqLyjWDarjtT1zdp7dc"
ENV = "DATABASE_HOST=db.internal\nPAYMENTS_SECRET_KEY=Zq8vN2wR7tY4uP1sK6mX\nDEBUG=0\n"


def run(server: RunningServer, arguments: dict, result: str) -> dict:
    provider = provider_for(
        OTLPSpanExporter(endpoint=server.grpc_endpoint, insecure=True), service="ops-desk"
    )
    script = AgentScript(provider.get_tracer("ops"))
    with script.agent("ops-agent", "Deploy the payments service.", "Done.") as root:
        script.chat([("deploy", arguments)])
        script.tool("deploy", arguments, result)
        script.chat()
    provider.shutdown()
    t = trajectory(server, trace_id_of(root))
    return next(r for r in t["results"] if r["rule_id"] == "no-secrets-in-tools")


@pytest.mark.parametrize(
    ("arguments", "result"),
    [
        ({"env": {"STRIPE_KEY": LIVE}}, "ok"),
        ({"service": "payments", "webhook_key": RESTRICTED}, "ok"),
        ({"service": "payments"}, ENV),  # a config read back: the key in the result
    ],
    ids=["stripe-live", "stripe-restricted", "secret-key-assignment"],
)
def test_a_secret_in_a_tool_call_is_found(
    evaluating_server: RunningServer, arguments: dict, result: str
) -> None:
    found = run(evaluating_server, arguments, result)
    assert (found["verdict"], found["reason"]) == ("fail", "secret_in_tool_call")
    assert "api_key in the" in found["message"]
    assert "live_" not in found["message"] and "Zq8v" not in found["message"]


def test_settings_that_only_name_a_secret_pass(evaluating_server: RunningServer) -> None:
    named = "STRIPE_SECRET_KEY=${STRIPE_SECRET_KEY}\nsecret_rotation=true\nPASSWORD: required\n"
    assert run(evaluating_server, {"service": "payments"}, named)["verdict"] == "pass"


def test_keys_that_only_contain_a_secret_word_pass(evaluating_server: RunningServer) -> None:
    arguments = {
        "secretary": "Jane",
        "password_policy": "min12chars",
        "passwordless": "enabled",
        "reset_password_link": "https://acme.example/r/8f2k",
        "api_key_id": "key-ops-2024",
    }
    assert run(evaluating_server, arguments, "ok")["verdict"] == "pass"
