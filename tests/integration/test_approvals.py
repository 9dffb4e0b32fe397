"""The shipped support pack on runs whose approval is only what the approval tool returned, sent
by the real OTel SDK: no `sextant.*` attribute on any span, no `enduser.id` anywhere."""

from __future__ import annotations

import json

from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter

from tests.support.admin import decisions, firing, trajectory
from tests.support.agents import AgentScript, provider_for, trace_id_of
from tests.support.server import RunningServer


def account_change(server: RunningServer, version: str, approval: dict | None) -> str:
    """lookup → (request_approval answering `approval`) → update_account, as plain GenAI spans."""
    provider = provider_for(
        OTLPSpanExporter(endpoint=server.grpc_endpoint, insecure=True),
        service="support-desk",
        version=version,
    )
    script = AgentScript(provider.get_tracer("support"))
    with script.agent("support-agent", "Change my e-mail", "Done.") as root:
        script.chat([("lookup_customer", {"email": "mira@example.com"})])
        script.tool("lookup_customer", {"email": "mira@example.com"}, '{"customer_id": "C-1"}')
        if approval is not None:
            asked = {"change": "email", "customer_id": "C-1"}
            script.chat([("request_approval", asked)])
            script.tool("request_approval", asked, json.dumps(approval))
        write = {"customer_id": "C-1", "email": "new@example.com"}
        script.chat([("update_account", write)])
        script.tool("update_account", write, "ok")
        script.chat()
    provider.shutdown()
    return trace_id_of(root)


def test_the_support_pack_quarantines_missing_and_denied_approvals_from_results_alone(
    deciding_server: RunningServer,
) -> None:
    approved = account_change(deciding_server, "3.0.0", {"approved": True, "ticket": "APR-1"})
    missing = account_change(deciding_server, "3.0.1", None)
    denied = account_change(deciding_server, "3.0.2", {"approved": False, "reason": "limit"})

    for version, trace_id in (("3.0.1", missing), ("3.0.2", denied)):
        t = trajectory(deciding_server, trace_id)
        write = next(s for s in t["steps_detail"] if s["name"] == "update_account")
        result = next(r for r in t["results"] if r["rule_id"] == "approval-before-account-change")
        assert (result["verdict"], result["reason"]) == ("fail", "approval_boundary_violation")
        assert result["evidence_span_ids"] == [write["span_id"]]
        assert result["requested_decision"] == "QUARANTINE"
        d = firing(deciding_server, "QUARANTINE", service_version=version)
        assert d["reasons"] == ["approval_boundary_violation"]
        assert d["evidence_trace_ids"] == [trace_id]
    asked = next(
        s for s in trajectory(deciding_server, denied)["steps_detail"] if s["kind"] == "approval"
    )
    assert asked["approval_status"] == "denied"  # filled for SQL users too

    t = trajectory(deciding_server, approved)
    assert t["verdict"] == "pass"
    asked = next(s for s in t["steps_detail"] if s["name"] == "request_approval")
    assert (asked["kind"], asked["approval_status"]) == ("approval", "approved")
    support = {r["rule_id"]: r["verdict"] for r in t["results"] if r["pack"] == "support-agent"}
    assert support["approval-before-account-change"] == "pass"
    assert support["acts-as-the-requesting-user"] == "pass"  # missing enduser.id, missing: pass
    assert "review" not in {r["verdict"] for r in t["results"]}
    # Decision rounds have run (the other two targets fired); this one has nothing to decide.
    assert [d for d in decisions(deciding_server) if d["service_version"] == "3.0.0"] == []
