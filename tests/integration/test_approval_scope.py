"""The shipped support pack through the running server: an approval covers only the account it
names, and only a write asked for by a model call that started after its answer. Runs sent by
the real OTel SDK, and the recorded runs of LangGraph (OpenInference, OpenLLMetry), the OpenAI
Agents SDK and the plain Python SDK sent as they were exported."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import requests
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter

from tests.support.admin import firing, trajectory
from tests.support.agents import AgentScript, provider_for, trace_id_of
from tests.support.captures import CAPTURES, expected_for, send
from tests.support.cli import sextant
from tests.support.server import DECIDE_FAST, FAST, RunningServer, serve
from tests.support.wait import wait_for

RULE = "approval-before-account-change"
APPROVED = json.dumps({"approved": True, "approver": "lead-7"})
FAMILIES = sorted(
    p.name.removesuffix("-one_turn_approval.otlp.json")
    for p in CAPTURES.glob("*-one_turn_approval.otlp.json")
)


def account_change(
    server: RunningServer,
    version: str,
    approved_for: str,
    one_turn: bool,
    write_first: bool = False,
) -> str:
    """lookup → request_approval for `approved_for` → update_account of C-2002, as plain GenAI
    spans; with `one_turn` the model asks for the approval and the write in one answer, and the
    loop runs them in the order given."""
    provider = provider_for(
        OTLPSpanExporter(endpoint=server.grpc_endpoint, insecure=True),
        service="support-desk",
        version=version,
    )
    script = AgentScript(provider.get_tracer("support"))
    asked = {"action": "update_email", "customer_id": approved_for}
    write = {"customer_id": "C-2002", "email": "mira@example.org"}
    with script.agent("support-agent", "Change the e-mail of C-2002", "Done.") as root:
        script.chat([("lookup_customer", {"customer_id": "C-2002"})])
        script.tool("lookup_customer", {"customer_id": "C-2002"}, '{"tier": "gold"}')
        if one_turn:
            script.chat([("request_approval", asked), ("update_account", write)])
            calls = [("request_approval", asked, APPROVED), ("update_account", write, "ok")]
            for name, arguments, result in reversed(calls) if write_first else calls:
                script.tool(name, arguments, result)
        else:
            script.chat([("request_approval", asked)])
            script.tool("request_approval", asked, APPROVED)
            script.chat([("update_account", write)])
            script.tool("update_account", write, "ok")
        script.chat()
    provider.shutdown()
    return trace_id_of(root)


def rule_result(t: dict) -> tuple[str, str, list[str]]:
    names = {s["span_id"]: s["name"] for s in t["steps_detail"]}
    r = next(r for r in t["results"] if r["rule_id"] == RULE)
    return r["verdict"], r["reason"], [names[e] for e in r["evidence_span_ids"]]


def test_an_approval_for_another_account_is_quarantined_with_both_steps(
    deciding_server: RunningServer,
) -> None:
    other = account_change(deciding_server, "4.0.0", "C-1001", one_turn=False)
    same = account_change(deciding_server, "4.0.1", "C-2002", one_turn=False)

    t = trajectory(deciding_server, other)
    assert rule_result(t) == (
        "fail",
        "wrong_authorization_context",
        ["request_approval", "update_account"],
    )
    found = next(r for r in t["results"] if r["rule_id"] == RULE)
    assert "'C-1001'" in found["message"] and "'C-2002'" in found["message"]
    d = firing(deciding_server, "QUARANTINE", service_version="4.0.0")
    assert d["reasons"] == ["wrong_authorization_context"]
    assert d["evidence_trace_ids"] == [other]

    t = trajectory(deciding_server, same)
    assert t["verdict"] == "pass"
    assert rule_result(t)[0] == "pass"


def test_a_write_asked_for_with_its_approval_fails_whatever_order_the_loop_ran_them(
    deciding_server: RunningServer, capsys: pytest.CaptureFixture[str]
) -> None:
    runs = [
        account_change(deciding_server, "4.1.0", "C-2002", one_turn=True, write_first=first)
        for first in (False, True, False, True)
    ]
    later = account_change(deciding_server, "4.1.1", "C-2002", one_turn=False)
    for trace_id in runs:
        # the approval, the model call that asked for both, the write
        assert rule_result(trajectory(deciding_server, trace_id)) == (
            "fail",
            "decided_before_approval",
            ["request_approval", "gpt-4.1-mini", "update_account"],
        )
    d = firing(deciding_server, "QUARANTINE", service_version="4.1.0")
    assert d["reasons"] == ["decided_before_approval"]
    t = trajectory(deciding_server, later)
    assert t["verdict"] == "pass"
    # Each tool step names the model call that asked for it, in the store as in the API.
    asked = {s["name"]: s["requested_by"] for s in t["steps_detail"] if s["kind"] != "llm"}
    models = [s["span_id"] for s in t["steps_detail"] if s["kind"] == "llm"]
    assert asked["request_approval"] == models[1] and asked["update_account"] == models[2]
    # Replayed from the store under the same packs, nothing changes: the order was kept.
    code, out = sextant(
        capsys,
        "replay",
        "--url",
        deciding_server.admin_url,
        "--trace-id",
        runs[0],
        "--trace-id",
        later,
    )
    assert code == 0, out
    assert "0 rule changes" in out


@pytest.mark.parametrize("family", FAMILIES)
def test_recorded_runs_of_every_instrumentation_get_their_verdict(
    evaluating_server: RunningServer, family: str
) -> None:
    for scenario, reason, evidence in (
        ("wrong_subject", "wrong_authorization_context", 2),
        ("one_turn_approval", "decided_before_approval", 3),
    ):
        path = CAPTURES / f"{family}-{scenario}.otlp.json"
        send(evaluating_server, path, "http/json")
        t = trajectory(evaluating_server, expected_for(path)["trace_id"])
        verdict, got, steps = rule_result(t)
        assert (verdict, got, len(steps)) == ("fail", reason, evidence), scenario
        assert (steps[0], steps[-1]) == ("request_approval", "update_account")


SESSION_PACK = """
name: support-sessions
version: "1"
owner: support-oncall
selector: {service: support-desk}
approvals: {tools: [request_approval]}
rules:
  - id: approval-for-the-account
    type: approval_lifetime
    writes: {kind: tool, name: "update_*"}
    max_turns: 3
    same_subject:
      - {approval_argument: $.customer_id, action_argument: $.customer_id}
    causal: true
    reason: stale_approval
    on_fail: QUARANTINE
"""


def conversation_turn(server: RunningServer, conversation: str, steps: list) -> str:
    """One turn of a conversation: model calls asking for each tool call, then the answer."""
    provider = provider_for(
        OTLPSpanExporter(endpoint=server.grpc_endpoint, insecure=True),
        service="support-desk",
        version="5.0.0",
    )
    script = AgentScript(provider.get_tracer("support"))
    attrs = {"gen_ai.conversation.id": conversation}
    with script.agent("support-agent", "Account change", "Done.", **attrs) as root:
        for name, arguments, result in steps:
            script.chat([(name, arguments)])
            script.tool(name, arguments, result)
        script.chat()
    provider.shutdown()
    return trace_id_of(root)


def test_a_session_approval_for_another_account_does_not_cover_a_later_write(
    tmp_path: Path,
) -> None:
    server = serve(
        tmp_path,
        {"sessions": SESSION_PACK},
        assembler=FAST,
        decisions=DECIDE_FAST,
        sessions={"tick_seconds": 0.1, "idle_seconds": 2.0},
    )
    try:
        asked = ("request_approval", {"action": "update_email", "customer_id": "C-1001"}, APPROVED)
        wrote = ("update_account", {"customer_id": "C-2002", "email": "m@x.org"}, "ok")
        first = conversation_turn(server, "conv-other", [asked])
        second = conversation_turn(server, "conv-other", [wrote])

        def failed() -> dict | None:
            reply = requests.get(f"{server.admin_url}/api/v1/sessions/conv-other", timeout=5)
            found = reply.json() if reply.status_code == 200 else None
            return found if found and found["verdict"] == "fail" else None

        found = wait_for(failed, timeout=15)
        (result,) = [r for r in found["results"] if r["verdict"] == "fail"]
        assert result["reason"] == "wrong_authorization_context"
        assert result["evidence_trace_ids"] == [first, second]
        assert "'C-1001'" in result["message"] and "'C-2002'" in result["message"]
        d = firing(server, "QUARANTINE", service_version="5.0.0")
        assert d["reasons"] == ["wrong_authorization_context"]
    finally:
        server.stop()
