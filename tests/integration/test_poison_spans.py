"""A span whose values the store cannot hold never stops assembly: its value is kept as text and
flagged, or its trace is stored as a build error; every other run is still evaluated."""

from __future__ import annotations

from pathlib import Path

import orjson
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter

from collector.store.database import Database
from tests.support.admin import firing, trajectory
from tests.support.agents import AgentScript, provider_for, trace_id_of
from tests.support.otlp import grpc_export, new_span_id, new_trace_id, trace_request
from tests.support.server import (
    DECIDE_FAST,
    FAST,
    SHIPPED_PACKS,
    RunningServer,
    serve,
    serve_deciding,
)
from tests.support.wait import wait_for

INT64_MAX = 2**63 - 1
LEAK_TARGET = {"service_name": "billing-desk", "agent_name": "billing-agent"}


def deep_json(levels: int) -> str:
    text = "{}"
    for _ in range(levels):
        text = '{"a":' + text + "}"
    return text


def leaking_run(server: RunningServer) -> str:
    """A good run from another service whose tool call carries an API key."""
    provider = provider_for(
        OTLPSpanExporter(endpoint=server.grpc_endpoint, insecure=True), service="billing-desk"
    )
    script = AgentScript(provider.get_tracer("billing"))
    with script.agent("billing-agent", "Charge order 7", "Charged.") as root:
        script.chat([("charge", {"order": 7})])
        script.tool("charge", {"order": 7, "api_key": "sk-proj-" + "A1b2C3d4" * 4})
        script.chat()
    provider.shutdown()
    return trace_id_of(root)


def send_poison(server: RunningServer, children: list[dict], service: str = "poison-svc") -> str:
    """An agent run of one root and `children` (span specs without ids), over OTLP/gRPC."""
    trace_id, root = new_trace_id(), new_span_id()
    spans = [
        {
            "trace_id": trace_id,
            "span_id": root,
            "name": "invoke_agent poison-agent",
            "attributes": {"gen_ai.operation.name": "invoke_agent"},
        },
        *(
            {"trace_id": trace_id, "span_id": new_span_id(), "parent_span_id": root, **c}
            for c in children
        ),
    ]
    reply = grpc_export(server, trace_request(spans, {"service.name": service}).SerializeToString())
    assert not reply.HasField("partial_success")  # acknowledged whole
    return trace_id.hex()


def deep_tool_span() -> dict:
    return {
        "name": "execute_tool lookup",
        "attributes": {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": "lookup",
            "gen_ai.tool.call.arguments": deep_json(300),
        },
    }


def huge_chat_span() -> dict:
    return {
        "name": "chat m",
        "attributes": {"gen_ai.operation.name": "chat", "gen_ai.usage.input_tokens": INT64_MAX},
    }


def assert_leak_flagged(server: RunningServer) -> None:
    leak = trajectory(server, leaking_run(server))
    assert "secret_in_tool_call" in leak["verdict_reasons"]
    d = firing(server, "QUARANTINE", **LEAK_TARGET)
    assert d["reasons"] == ["secret_in_tool_call"]


def test_deep_tool_arguments_are_kept_as_text_and_other_runs_are_evaluated(tmp_path: Path):
    server = serve_deciding(tmp_path)
    try:
        poison = send_poison(server, [deep_tool_span()])
        assert_leak_flagged(server)
        t = trajectory(server, poison)
        (tool,) = [s for s in t["steps_detail"] if s["kind"] == "tool"]
        assert tool["arguments"] == deep_json(300)  # the text as sent, a string
        flags = server.query(
            "SELECT kept_as_text FROM spans WHERE trace_id = ? AND step_kind = 'tool'", [poison]
        )
        assert flags == [(["gen_ai.tool.call.arguments"],)]
    finally:
        server.stop()


def test_token_totals_past_int64_are_kept_as_text_and_other_runs_are_evaluated(tmp_path: Path):
    server = serve_deciding(tmp_path)
    try:
        poison = send_poison(server, [huge_chat_span(), huge_chat_span()])
        assert_leak_flagged(server)
        t = trajectory(server, poison)
        assert t["input_tokens"] is None
        assert orjson.loads(t["unrepresentable"]) == {"input_tokens": str(2 * INT64_MAX)}
        # The run is judged on the true total: the budget rule sees it.
        assert "budget_exceeded" in t["verdict_reasons"]
    finally:
        server.stop()


def test_a_trace_that_cannot_be_built_is_a_build_error_even_after_a_restart(tmp_path: Path):
    """Spans stored by an earlier version (here: deep JSON stored as it was sent) are built
    once, as a build error with its text, and block nothing, before and after a restart."""
    slow = {**FAST, "quiet_period_seconds": 3600, "max_trace_age_seconds": 7200}
    server = serve(tmp_path, SHIPPED_PACKS, assembler=slow, decisions=DECIDE_FAST)
    poison = send_poison(server, [deep_tool_span()])
    server.stop()
    database = Database(tmp_path / "data" / "sextant.duckdb")
    database.open()
    database.cursor().execute(
        "UPDATE spans SET tool_arguments = ? WHERE step_kind = 'tool'",
        [deep_json(300)],
    )
    database.close()

    server = serve_deciding(tmp_path)
    try:
        assert_leak_flagged(server)
        t = trajectory(server, poison)
        assert (t["status"], t["incomplete_reasons"]) == ("incomplete", ["build_error"])
        assert "Recursion limit reached" in t["build_error"]
        d = firing(server, "REVIEW", service_name="poison-svc", policy="default/review")
        assert d["reasons"] == ["build_error"]
        assert server.metric("sextant_assembler_build_errors_total") == 1
    finally:
        server.stop()
    server = serve_deciding(tmp_path)
    try:
        assert_leak_flagged(server)
        stored = server.query("SELECT count(*) FROM trajectories WHERE trace_id = ?", [poison])
        assert stored == [(1,)]  # built once, not again at every start
    finally:
        server.stop()


def test_a_time_past_2262_is_stored_and_the_run_evaluated(tmp_path: Path):
    server = serve_deciding(tmp_path)
    try:
        late = {"name": "execute_tool later", "start": 2**64 - 2, "end": 2**64 - 1}
        poison = send_poison(server, [late])
        assert_leak_flagged(server)
        t = trajectory(server, poison)
        assert t["end_time_unix_nano"] == 2**64 - 1
        wait_for(lambda: server.query("SELECT count(*) FROM results WHERE trace_id = ?", [poison]))
    finally:
        server.stop()


def test_the_deep_span_is_stored_whole(tmp_path: Path):
    """Nothing acknowledged is lost: the span attributes keep the text as sent."""
    server = serve_deciding(tmp_path)
    try:
        poison = send_poison(server, [deep_tool_span()])
        (attrs,) = server.query(
            "SELECT attributes FROM spans WHERE trace_id = ? AND step_kind = 'tool'", [poison]
        )[0]
        assert orjson.loads(attrs)["gen_ai.tool.call.arguments"] == deep_json(300)
    finally:
        server.stop()
