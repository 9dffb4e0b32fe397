"""Decisions from real agent traffic: policies, on_fail, coverage, people, metrics, restarts."""

from __future__ import annotations

import shutil
import time
import zipfile
from pathlib import Path

import orjson
import requests
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter

from collector.config.sections import BUILTIN_RULES
from tests.support.admin import decisions, firing, trajectory
from tests.support.agents import AgentScript, booking_run, provider_for, support_run, trace_id_of
from tests.support.cli import sextant
from tests.support.server import DECIDE_FAST, RunningServer, serve_deciding
from tests.support.wait import wait_for

TOKEN = "t0ken-0123456789"
TARGET = {"service": "support-desk", "agent": "support-agent", "version": "2.3.1"}


def serve_with_policy(tmp_path: Path, policies: str) -> RunningServer:
    """The shipped packs, the support pack with these decision policies added."""
    rules = tmp_path / "rules"
    shutil.copytree(BUILTIN_RULES, rules)
    pack = rules / "support-agent.yaml"
    pack.write_text(pack.read_text() + "\ndecisions:" + policies)
    return serve_deciding(tmp_path)


def test_an_unsafe_run_quarantines_its_target_with_owner_reasons_and_evidence(deciding_server):
    good = support_run(deciding_server)
    trajectory(deciding_server, good)
    bad = support_run(deciding_server, approve=False)
    trajectory(deciding_server, bad)
    d = firing(deciding_server, "QUARANTINE", service_name="support-desk")
    assert d["reasons"] == ["approval_boundary_violation"]
    assert d["owner"] == "support-platform-oncall"
    assert d["evidence_trace_ids"] == [bad]
    assert d["rules"] == ["support-agent/approval-before-account-change"]
    assert d["packs"] == ["support-agent@1.0.0"]
    assert (d["agent_name"], d["service_version"]) == ("support-agent", "2.3.1")
    quarantine = {**TARGET, "decision": "QUARANTINE"}
    wait_for(lambda: deciding_server.metric("sextant_decision_state", quarantine) == 1)
    assert deciding_server.metric("sextant_decision_state", {**TARGET, "decision": "PASS"}) == 0
    history = requests.get(
        f"{deciding_server.admin_url}/api/v1/decisions/{d['decision_id']}", timeout=5
    )
    assert [h["event"] for h in history.json()["history"]] == ["firing"]
    targets = requests.get(f"{deciding_server.admin_url}/api/v1/targets", timeout=5).json()[
        "targets"
    ]
    assert [(t["service"], t["decision"]) for t in targets] == [("support-desk", "QUARANTINE")]


def test_a_clean_target_passes(deciding_server):
    trajectory(deciding_server, support_run(deciding_server))
    wait_for(
        lambda: (
            deciding_server.metric("sextant_decision_state", {**TARGET, "decision": "PASS"}) == 1
        )
    )
    assert decisions(deciding_server, state="active") == []


def test_people_acknowledge_and_resolve_and_the_history_keeps_who_did_what(deciding_server):
    trajectory(deciding_server, support_run(deciding_server, approve=False))
    d = firing(deciding_server, "QUARANTINE")
    url = f"{deciding_server.admin_url}/api/v1/decisions/{d['decision_id']}"
    assert requests.post(f"{url}/ack", json={"note": "x"}, timeout=5).status_code == 400
    bad_note = requests.post(f"{url}/ack", json={"by": "ana", "note": 123}, timeout=5)
    assert (bad_note.status_code, bad_note.json()["error"]) == (400, "note must be text")
    ack = requests.post(f"{url}/ack", json={"by": "ana", "note": "looking"}, timeout=5)
    assert ack.status_code == 200
    done = requests.post(f"{url}/resolve", json={"by": "ana", "note": "prompt fixed"}, timeout=5)
    assert done.json()["state"] == "resolved"
    history = requests.get(url, timeout=5).json()["history"]
    assert [(h["event"], h["actor"], h["note"]) for h in history] == [
        ("firing", "sextant", None),
        ("ack", "ana", "looking"),
        ("resolve", "ana", "prompt fixed"),
    ]
    assert [h["seq"] for h in history] == [1, 2, 3]
    # The failure that was dealt with does not reopen it; a new one opens a new decision.
    deciding_server.pipeline.decisions.evaluate()
    assert decisions(deciding_server, state="active") == []
    again = support_run(deciding_server, approve=False)
    trajectory(deciding_server, again)
    new = firing(deciding_server, "QUARANTINE")
    assert new["decision_id"] != d["decision_id"]
    assert new["evidence_trace_ids"][0] == again
    gone = requests.post(f"{url}/resolve", json={"by": "ana"}, timeout=5)
    assert gone.status_code == 404


def test_a_pack_policy_needs_its_count_and_waits_for_its_for(tmp_path):
    server = serve_with_policy(
        tmp_path,
        """
  - id: downgrade-on-repeated-violations
    decision: DOWNGRADE
    when: {reason: approval_boundary_violation}
    count: 2
    window: 5m
    for: 1s
    resolve_after: 0s
""",
    )
    try:
        trajectory(server, support_run(server, approve=False))
        server.pipeline.decisions.evaluate()
        assert decisions(server, decision="DOWNGRADE") == []
        # the policy covers the rule: its on_fail (QUARANTINE) does not apply by itself
        assert decisions(server, decision="QUARANTINE") == []
        trajectory(server, support_run(server, approve=False))
        pending = wait_for(lambda: decisions(server, state="pending", decision="DOWNGRADE"))
        assert pending[0]["policy"] == "support-agent/downgrade-on-repeated-violations"
        d = firing(server, "DOWNGRADE")
        assert d["decision_id"] == pending[0]["decision_id"]
        assert len(d["evidence_trace_ids"]) == 2
    finally:
        server.stop()


def test_an_incomplete_trace_is_lost_coverage_not_a_pass(deciding_server):
    provider = provider_for(
        OTLPSpanExporter(endpoint=deciding_server.grpc_endpoint, insecure=True),
        service="support-desk",
    )
    script = AgentScript(provider.get_tracer("support"))
    tracer = provider.get_tracer("support")
    root = tracer.start_span("invoke_agent support-agent")  # never ends: no root arrives
    from opentelemetry import trace

    with trace.use_span(root, end_on_exit=False):
        script.tool("lookup_customer", {"customer": "C-1"})
    provider.force_flush()
    trace_id = trace_id_of(root)
    d = firing(deciding_server, "REVIEW", policy="coverage/incomplete_traces")
    assert d["reasons"] == ["coverage_lost_incomplete_traces"]
    assert d["evidence_trace_ids"] == [trace_id]
    provider.shutdown()


def bad_span_from(service: str | None) -> dict:
    """An OTLP/JSON request with one span whose trace id is all zeros, from `service`."""
    resource = {"attributes": [{"key": "service.name", "value": {"stringValue": service}}]}
    spans = {"scopeSpans": [{"spans": [{"traceId": "00" * 16, "spanId": "ab" * 8, "name": "x"}]}]}
    return {"resourceSpans": [{**spans, **({"resource": resource} if service else {})}]}


def test_rejected_spans_take_the_sending_services_targets_out_of_pass_only(deciding_server):
    trajectory(deciding_server, support_run(deciding_server))
    exporter = OTLPSpanExporter(endpoint=deciding_server.grpc_endpoint, insecure=True)
    provider = provider_for(exporter, service="travel-desk")
    trajectory(deciding_server, booking_run(provider))
    provider.shutdown()
    travel = {"service": "travel-desk", "agent": "travel-agent", "version": "2.3.1"}
    for target in (TARGET, travel):
        wait_for(
            lambda t=target: (
                deciding_server.metric("sextant_decision_state", {**t, "decision": "PASS"}) == 1
            )
        )
    url = f"{deciding_server.http_url}/v1/traces"
    reply = requests.post(url, json=bad_span_from("support-desk"), timeout=5)
    assert reply.json()["partialSuccess"]["rejectedSpans"] == "1"
    d = firing(deciding_server, "REVIEW", policy="coverage/rejected_spans")
    assert (d["service_name"], d["reasons"]) == ("support-desk", ["coverage_lost_rejected_spans"])
    assert "from service support-desk" in d["summary"]
    wait_for(
        lambda: (
            deciding_server.metric("sextant_decision_state", {**TARGET, "decision": "REVIEW"}) == 1
        )
    )
    assert deciding_server.metric("sextant_decision_state", {**TARGET, "decision": "PASS"}) == 0
    # The other service lost nothing: it still passes, with no REVIEW of its own.
    assert deciding_server.metric("sextant_decision_state", {**travel, "decision": "PASS"}) == 1
    assert not deciding_server.metric("sextant_decision_state", {**travel, "decision": "REVIEW"})
    assert [x["service_name"] for x in decisions(deciding_server, state="firing")] == [
        "support-desk"
    ]


def test_rejections_from_no_known_sender_are_the_collectors_own_review(deciding_server):
    trajectory(deciding_server, support_run(deciding_server))
    url = f"{deciding_server.http_url}/v1/traces"
    reply = requests.post(url, json=bad_span_from(None), timeout=5)
    assert reply.json()["partialSuccess"]["rejectedSpans"] == "1"
    # The decision fires on what its round saw, and keeps that summary while it fires.
    first = firing(deciding_server, "REVIEW", policy="coverage/rejected_spans")
    assert (first["service_name"], first["agent_name"], first["service_version"]) == ("", "", "")
    assert "(collector): 1 span(s) or undecodable request(s) from no service" in first["summary"]
    # Resolved by hand, it comes back only with a new rejection, here an undecodable request,
    # counting every rejection of the window.
    resolve = f"{deciding_server.admin_url}/api/v1/decisions/{first['decision_id']}/resolve"
    assert requests.post(resolve, json={"by": "ana"}, timeout=5).status_code == 200
    undecodable = requests.post(
        url, data=b"{not json", headers={"Content-Type": "application/json"}, timeout=5
    )
    assert undecodable.status_code == 400
    d = wait_for(
        lambda: next(
            (
                x
                for x in decisions(deciding_server, state="firing", decision="REVIEW")
                if x["policy"] == "coverage/rejected_spans"
                and x["decision_id"] != first["decision_id"]
            ),
            None,
        ),
        timeout=15,
    )
    assert (d["service_name"], d["agent_name"], d["service_version"]) == ("", "", "")
    assert "(collector): 2 span(s) or undecodable request(s) from no service" in d["summary"]
    # The agents' own target keeps its PASS: Sextant's health is not the agents' verdict.
    wait_for(
        lambda: (
            deciding_server.metric("sextant_decision_state", {**TARGET, "decision": "PASS"}) == 1
        )
    )
    assert not deciding_server.metric("sextant_decision_state", {**TARGET, "decision": "REVIEW"})


def test_a_violating_run_fires_as_soon_as_its_result_is_stored_not_at_the_next_interval(tmp_path):
    # Rounds every 30 s: only the stored result can bring the decision this soon.
    server = serve_deciding(tmp_path, decisions={**DECIDE_FAST, "interval_seconds": 30})
    try:
        for _ in range(3):  # each resolved by hand, so the next violation opens a new decision
            sent = time.monotonic()
            bad = support_run(server, approve=False)
            d = wait_for(lambda bad=bad: opened_by(server, bad), timeout=5, interval=0.005)
            assert time.monotonic() - sent < 5  # the run closes 0.3 s after its last span
            [(stored,)] = server.query(
                "SELECT max(evaluated_at) FROM results WHERE trace_id = ? AND verdict = 'fail'",
                [bad],
            )
            [(fired,)] = server.query(
                "SELECT fired_at FROM decisions WHERE decision_id = ? AND event = 'firing'",
                [d["decision_id"]],
            )
            assert (fired - stored).total_seconds() < 0.25  # evaluated_at precedes its commit
            url = f"{server.admin_url}/api/v1/decisions/{d['decision_id']}/resolve"
            assert requests.post(url, json={"by": "ana"}, timeout=5).status_code == 200
        assert server.metric("sextant_decision_evaluations_total") < 20
    finally:
        server.stop()


def opened_by(server: RunningServer, trace_id: str) -> dict | None:
    """The firing QUARANTINE whose newest evidence is this run."""
    found = decisions(server, state="firing", decision="QUARANTINE")
    return next((d for d in found if d["evidence_trace_ids"][0] == trace_id), None)


def test_a_target_that_goes_silent_gets_no_data_when_asked(tmp_path):
    asked = {**DECIDE_FAST, "no_data": "review", "no_data_after_seconds": 1.0}
    server = serve_deciding(tmp_path, decisions=asked)
    try:
        trajectory(server, support_run(server))
        d = firing(server, "REVIEW", policy="coverage/no_data")
        assert d["reasons"] == ["no_data"]
        assert d["service_name"] == "support-desk"
    finally:
        server.stop()


def test_firing_decisions_survive_a_restart_with_their_ids(tmp_path):
    server = serve_deciding(tmp_path)
    trajectory(server, support_run(server, approve=False))
    before = firing(server, "QUARANTINE")
    server.stop()
    server = serve_deciding(tmp_path)
    try:
        active = {d["decision_id"] for d in decisions(server, state="firing")}
        assert before["decision_id"] in active
        snapshot = server.pipeline.decisions.snapshot()
        assert before["decision_id"] in {s.id for s in snapshot.states}
    finally:
        server.stop()


def test_the_decisions_command_lists_acknowledges_and_resolves(deciding_server, capsys):
    bad = support_run(deciding_server, approve=False)
    trajectory(deciding_server, bad)
    d = firing(deciding_server, "QUARANTINE")
    url = ("--url", deciding_server.admin_url)
    code, out = sextant(capsys, "decisions", *url)
    assert code == 0
    header, line = out.splitlines()[:2]
    assert header.split()[:4] == ["ID", "DECISION", "STATE", "TARGET"]
    assert line.split()[:4] == [
        d["decision_id"],
        "QUARANTINE",
        "firing",
        "support-desk/support-agent@2.3.1",
    ]
    assert bad in line and "approval_boundary_violation" in line
    code, out = sextant(capsys, "decisions", "ack", d["decision_id"], "--by", "ana", *url)
    assert (code, out.strip()) == (0, f"{d['decision_id']}: ack by ana (firing)")
    code, out = sextant(
        capsys, "decisions", "resolve", d["decision_id"], "--by", "ana", "--note", "fixed", *url
    )
    assert code == 0
    code, out = sextant(capsys, "decisions", "show", d["decision_id"], *url)
    events = [line.split()[2] for line in out.splitlines()[1:]]
    assert events == ["firing", "ack", "resolve"]
    code, out = sextant(capsys, "decisions", "resolve", "d-nope", "--by", "ana", *url)
    assert code == 1 and "HTTP 404" in out and "no pending or firing decision d-nope" in out
    code, out = sextant(capsys, "decisions", *url)
    assert out.strip() == "no decisions"


def test_an_evidence_bundle_of_a_real_quarantine(deciding_server, capsys, tmp_path):
    bad = support_run(deciding_server, approve=False)
    trajectory(deciding_server, bad)
    d = firing(deciding_server, "QUARANTINE")
    bundle = tmp_path / "evidence.zip"
    code, out = sextant(
        capsys,
        "evidence",
        d["decision_id"],
        "--out",
        str(bundle),
        "--url",
        deciding_server.admin_url,
    )
    assert code == 0, out
    with zipfile.ZipFile(bundle) as archive:
        names = set(archive.namelist())
        assert {"decision.json", f"trajectories/{bad}.json", f"spans/{bad}.jsonl"} <= names
        assert "packs/support-agent@1.0.0.yaml" in names
        pack_text = (deciding_server.rules_dir / "support-agent.yaml").read_text()
        assert archive.read("packs/support-agent@1.0.0.yaml").decode() == pack_text
        decision = orjson.loads(archive.read("decision.json"))
        assert (decision["decision"], decision["evidence_trace_ids"]) == ("QUARANTINE", [bad])


def test_writes_through_the_admin_api_need_the_token_when_one_is_set(tmp_path, capsys):
    server = serve_deciding(tmp_path, auth={"tokens": [TOKEN]})
    try:
        trajectory(server, support_run_with_token(server))
        d = firing(server, "QUARANTINE")
        url = ("--url", server.admin_url)
        code, out = sextant(capsys, "decisions", "ack", d["decision_id"], "--by", "ana", *url)
        assert code == 1 and "HTTP 401" in out
        code, out = sextant(
            capsys, "decisions", "ack", d["decision_id"], "--by", "ana", "--token", TOKEN, *url
        )
        assert code == 0, out
        code, out = sextant(capsys, "baseline", "save", "before-fix", *url)
        assert code == 1 and "HTTP 401" in out
        code, out = sextant(capsys, "baseline", "save", "before-fix", "--token", TOKEN, *url)
        assert code == 0 and "baseline before-fix saved" in out
        reply = requests.post(f"{server.admin_url}/api/v1/alerts/test", json={}, timeout=5)
        assert reply.status_code == 401
    finally:
        server.stop()


def support_run_with_token(server: RunningServer) -> str:
    provider = provider_for(
        OTLPSpanExporter(
            endpoint=server.grpc_endpoint,
            insecure=True,
            headers={"authorization": f"Bearer {TOKEN}"},
        ),
        service="support-desk",
        version="2.3.1",
    )
    script = AgentScript(provider.get_tracer("support"))
    with script.agent("support-agent", "Change my e-mail", "Done.", **{"enduser.id": "mira"}) as r:
        script.tool("lookup_customer", {"customer": "C-1"}, **{"enduser.id": "mira"})
        script.tool("update_account", {"customer": "C-1"}, **{"enduser.id": "mira"})
    provider.shutdown()
    return trace_id_of(r)


def test_a_policy_counts_a_run_that_fails_several_matching_rules_once(tmp_path):
    server = serve_with_policy(
        tmp_path,
        """
  - id: disable-on-serious-failures
    decision: DISABLE
    when: {severity: high}
    count: 2
    window: 5m
""",
    )
    try:
        # one run, two failures (approval: critical, identity: high): one run, not two
        first = support_run(server, approve=False, user="admin")
        t = trajectory(server, first)
        assert {"approval_boundary_violation", "wrong_authorization_context"} <= set(
            t["verdict_reasons"]
        )
        server.pipeline.decisions.evaluate()
        assert decisions(server, decision="DISABLE") == []
        assert server.metric("sextant_decision_state", {**TARGET, "decision": "DISABLE"}) == 0
        second = support_run(server, approve=False)
        trajectory(server, second)
        d = firing(server, "DISABLE")
        assert second in d["evidence_trace_ids"]
        assert d["reasons"] == ["approval_boundary_violation", "wrong_authorization_context"]
    finally:
        server.stop()


def test_a_firing_decision_keeps_the_newest_evidence_in_the_store_and_the_api(deciding_server):
    """Violating runs that come after the QUARANTINE fired are added to its evidence, newest
    first: recorded as `evidence` events, shown by the API, kept in the store."""
    first = support_run(deciding_server, approve=False)
    trajectory(deciding_server, first)
    d = firing(deciding_server, "QUARANTINE", service_name="support-desk")
    assert d["evidence_trace_ids"] == [first]
    later = []
    for _ in range(2):
        later.append(support_run(deciding_server, approve=False))
        trajectory(deciding_server, later[-1])
    url = f"{deciding_server.admin_url}/api/v1/decisions/{d['decision_id']}"

    def shown() -> dict | None:
        doc = requests.get(url, timeout=5).json()
        return doc if len(doc["decision"]["evidence_trace_ids"]) == 3 else None

    doc = wait_for(shown)
    found = doc["decision"]
    assert found["evidence_trace_ids"] == [*reversed(later), first]
    assert found["decision_id"] == d["decision_id"] and found["state"] == "firing"
    assert {h["event"] for h in doc["history"]} == {"firing", "evidence"}
    [listed] = decisions(deciding_server, state="firing", decision="QUARANTINE")
    assert listed["evidence_trace_ids"] == found["evidence_trace_ids"]
    stored = deciding_server.query(
        "SELECT evidence_trace_ids FROM decisions WHERE decision_id = ? ORDER BY seq DESC LIMIT 1",
        [d["decision_id"]],
    )
    assert stored == [(found["evidence_trace_ids"],)]
