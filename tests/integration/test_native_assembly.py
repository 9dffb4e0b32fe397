"""A server with `assembler.native: true`, which builds in its own threads, stores the
trajectories, steps and results a server with it off stores from its worker processes, for the
same spans: the recorded captures sent over OTLP/HTTP, and agent runs sent by the real OTel SDK
exporter to both servers at once, under the shipped packs (the support pack's approval
boundaries, `precedes` rules, among them)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

from tests.support.agents import AgentScript, booking_run, provider_for, trace_id_of
from tests.support.captures import CAPTURES, send
from tests.support.server import FAST, SHIPPED_PACKS, RunningServer, serve
from tests.support.wait import wait_for

FILES = sorted([*CAPTURES.glob("*.otlp.json"), *CAPTURES.glob("*.body.json")], key=lambda p: p.name)
# When each server received, closed and stored the run: not the same on two servers (two runs
# closed in the same look may be committed in either order, so their `store_seq` swap).
OWN_TIMES = ("first_received_at", "last_received_at", "closed_at", "evaluated_at", "store_seq")


def account_change(provider: Any, approve: bool) -> str:
    """A support-desk run that changes an account, approved first or not (the shipped support
    pack's precedes rules decide it)."""
    script = AgentScript(provider.get_tracer("support"))
    with script.agent("support-agent", "Change my e-mail", "Done.") as root:
        script.chat([("lookup_customer", {"customer_id": "C-1"})])
        script.tool("lookup_customer", {"customer_id": "C-1"})
        if approve:
            asked = {"change": "email", "customer_id": "C-1"}
            script.chat([("request_approval", asked)])
            script.tool(
                "request_approval", asked, "approved", **{"sextant.approval.status": "approved"}
            )
        write = {"customer_id": "C-1", "email": "new"}
        script.chat([("update_account", write)])
        script.tool("update_account", write)
        script.chat()
    return trace_id_of(root)


def rows(server: RunningServer, table: str, order: str) -> list[dict[str, Any]]:
    found = server.query_dicts(f"SELECT * FROM {table} ORDER BY {order}")
    return [{k: v for k, v in row.items() if k not in OWN_TIMES} for row in found]


def test_native_assembly_stores_what_python_assembly_stores(tmp_path: Path) -> None:
    python = serve(
        tmp_path / "python",
        SHIPPED_PACKS,
        assembler={**FAST, "native": False},
        rules={"reload_seconds": 0.1},
        workers={"processes": 2},
    )
    native = serve(
        tmp_path / "native",
        SHIPPED_PACKS,
        assembler={**FAST, "native": True},
        rules={"reload_seconds": 0.1},
        workers={"processes": 2},
    )
    servers = (python, native)
    try:
        for path in FILES:
            for server in servers:
                send(server, path, "http/json")
        travel = provider_for(OTLPSpanExporter(endpoint=python.grpc_endpoint, insecure=True))
        support = provider_for(
            OTLPSpanExporter(endpoint=python.grpc_endpoint, insecure=True), service="support-desk"
        )
        for provider in (travel, support):
            provider.add_span_processor(
                SimpleSpanProcessor(OTLPSpanExporter(endpoint=native.grpc_endpoint, insecure=True))
            )
        runs = [booking_run(travel), account_change(support, True), account_change(support, False)]
        travel.shutdown()
        support.shutdown()
        traces = len(FILES) + len(runs)
        for server in servers:
            wait_for(
                lambda s=server: s.query("SELECT count(*) FROM trajectories")[0][0] >= traces,
                timeout=30,
            )
            wait_for(lambda s=server: s.metric("sextant_assembler_pending_traces") == 0)
        for table, order in (
            ("trajectories", "trace_id, revision"),
            ("steps", "trace_id, revision, seq"),
            ("results", "trace_id, revision, pack, rule_id"),
        ):
            want, got = rows(python, table, order), rows(native, table, order)
            assert want, f"no {table} stored"
            assert got == want, table
        boundary = dict(
            native.query(
                "SELECT trace_id, verdict FROM results WHERE trace_id IN (?, ?)"
                " AND rule_id = 'approval-before-account-change'",
                runs[1:],
            )
        )
        assert boundary == {runs[1]: "pass", runs[2]: "fail"}
        assert native.metric("sextant_assembler_native_fallbacks_total", {"reason": "error"}) == 0
        assert native.metric("sextant_assembler_native_batches_total") >= 1
        assert python.metric("sextant_assembler_native_batches_total") == 0
        # The native server built every batch in its own threads: no worker process started.
        assert len(python.pipeline.workers.pids()) == 2
        assert native.pipeline.workers.pids() == []
    finally:
        for server in servers:
            server.stop()
