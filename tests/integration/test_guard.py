"""The runtime guard through the running server: runs sent span by span by the real OTel SDK,
the guard asked over plain HTTP and gRPC before the consequential call, and the verdict
afterwards read from the admin API."""

from __future__ import annotations

import gzip
import json
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
import requests
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

from collector.guard import wire
from tests.support.admin import firing, scraped, trajectory
from tests.support.agents import AgentScript, provider_for, trace_id_of
from tests.support.guard import answer, ask, ask_grpc
from tests.support.server import DECIDE_FAST, FAST, SHIPPED_PACKS, RunningServer, serve
from tests.support.wait import wait_for

TOKEN = "guard-test-token-0123456789"
RULE = "approval-before-account-change"
APPROVED = json.dumps({"approved": True, "approver": "lead-7"})
WRITE = {"customer_id": "C-2002", "email": "mira@example.org"}


def drop_pack(name: str, service: str) -> str:
    """A pack that DISABLEs a target of `service` whose run drops a table."""
    return f"""
name: {name}
version: "1"
owner: ops-oncall
selector: {{service: {service}}}
rules:
  - id: never-drop-tables
    type: absence
    step: {{kind: tool, name: "drop_*"}}
    reason: destructive_tool
    on_fail: DISABLE
"""


LENIENT_PACK = """
name: lenient
version: "1"
owner: ops-oncall
selector: {service: lenient-desk}
guard: {on_unavailable: allow}
rules:
  - id: no-drops
    type: absence
    step: {kind: tool, name: "drop_*"}
    reason: destructive_tool
"""


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    packs: dict[str, str | Path] = {
        "support-agent": SHIPPED_PACKS / "support-agent.yaml",
        "ops": drop_pack("ops", "ops-desk"),
        "listen": drop_pack("listen", "listen-desk"),
    }
    running = serve(
        tmp_path_factory.mktemp("guard"),
        packs,
        assembler=FAST,
        decisions=DECIDE_FAST,
        auth={"tokens": [TOKEN]},
    )
    try:
        yield running
    finally:
        running.stop()


def exporter(server: RunningServer) -> OTLPSpanExporter:
    return OTLPSpanExporter(
        endpoint=server.grpc_endpoint,
        insecure=True,
        headers=(("authorization", f"Bearer {TOKEN}"),),
    )


def span_id(span: Any) -> str:
    return format(span.get_span_context().span_id, "016x")


def account_change(
    server: RunningServer, version: str, approve: bool, obey: bool = True
) -> tuple[str, dict[str, Any]]:
    """lookup → (request_approval →) the model asks for update_account → the guard is asked
    → the write runs only when allowed (or, `obey` False, whatever the answer)."""
    provider = provider_for(exporter(server), service="support-desk", version=version)
    script = AgentScript(provider.get_tracer("support"))
    with script.agent("support-agent", "Change the e-mail of C-2002", "Done.") as root:
        script.chat([("lookup_customer", {"customer_id": "C-2002"})])
        script.tool("lookup_customer", {"customer_id": "C-2002"}, '{"tier": "gold"}')
        if approve:
            asked = {"action": "update_email", "customer_id": "C-2002"}
            script.chat([("request_approval", asked)])
            script.tool("request_approval", asked, APPROVED)
        script.chat([("update_account", WRITE)])
        got = answer(
            server,
            trace_id_of(root),
            "update_account",
            arguments=WRITE,
            tool_call_id=f"call_{script.turn - 1}_0",
            parent=span_id(root),
            version=version,
            headers={"Authorization": f"Bearer {TOKEN}"},
        )
        if got["answer"] == "allow" or not obey:
            script.tool("update_account", WRITE, "ok")
        script.chat()
    provider.shutdown()
    return trace_id_of(root), got


def steps(t: dict[str, Any]) -> list[tuple[str, str]]:
    return [(s["kind"], s["name"]) for s in t["steps_detail"]]


def result(t: dict[str, Any], rule: str) -> dict[str, Any] | None:
    return next((r for r in t["results"] if r["rule_id"] == rule), None)


def test_an_unapproved_write_is_denied_before_it_runs_and_the_verdict_agrees(
    server: RunningServer,
) -> None:
    def had(how: str) -> float:
        return scraped(server, "sextant_guard_runs_total", how=how) or 0.0

    def since(how: str) -> float:
        return had(how) - before[how]

    before = {how: had(how) for how in ("grown", "built", "read", "native")}
    trace_id, got = account_change(server, "5.0.0", approve=False)
    assert (got["answer"], got["reasons"]) == ("deny", ["approval_boundary_violation"]), got
    # open: weighed natively on the spans in memory, or read once loaded (and kept natively)
    assert (since("native") + since("read"), since("built")) == (1, 0)
    assert got["span_id"] in got["evidence"]

    t = trajectory(server, trace_id)
    # The check is a step of the run, and no state-changing call follows it.
    assert ("policy", "guard update_account") in steps(t)
    assert ("tool", "update_account") not in steps(t)
    guard_step = next(s for s in t["steps_detail"] if s["kind"] == "policy")
    assert guard_step["span_id"] == got["span_id"]
    assert all(r["verdict"] != "fail" for r in t["results"]), t["results"]
    # Closed, the run is weighed natively, kept since the first call with every span
    # acknowledged since: the same answer.
    again = answer(
        server,
        trace_id,
        "update_account",
        arguments=WRITE,
        version="5.0.0",
        headers={"Authorization": f"Bearer {TOKEN}"},
    )
    assert (again["answer"], again["reasons"]) == ("deny", ["approval_boundary_violation"])
    assert since("native") + since("read") == 2 and since("native") >= 1

    # An agent that runs the call anyway is failed afterwards for the reason it was told.
    ignored, told = account_change(server, "5.0.1", approve=False, obey=False)
    assert told["answer"] == "deny"
    t = trajectory(server, ignored)
    found = result(t, RULE)
    assert found is not None
    assert (found["verdict"], found["reason"]) == ("fail", told["reasons"][0])


def test_an_approved_write_is_allowed_and_passes_afterwards(server: RunningServer) -> None:
    trace_id, got = account_change(server, "5.1.0", approve=True)
    assert got == {
        "answer": "allow",
        "reasons": [],
        "evidence": [],
        "messages": [],
        "span_id": got["span_id"],
        "decision": "PASS",
    }
    t = trajectory(server, trace_id)
    assert ("tool", "update_account") in steps(t)
    assert ("policy", "guard update_account") in steps(t)
    found = result(t, RULE)
    assert found is not None and found["verdict"] == "pass"


def drop_a_table(script: AgentScript, server: RunningServer, agent: str, service: str) -> None:
    """A run of `agent` that drops a table, stored, and the DISABLE it fires for `service`."""
    with script.agent(agent, "Clean up", "Done.") as root:
        script.chat([("drop_table", {"table": "customers"})])
        script.tool("drop_table", {"table": "customers"}, "dropped")
        script.chat()
    trajectory(server, trace_id_of(root))
    firing(server, "DISABLE", service_name=service)


def test_a_disabled_target_is_denied_every_call(server: RunningServer) -> None:
    provider = provider_for(exporter(server), service="ops-desk", version="1.0.0")
    script = AgentScript(provider.get_tracer("ops"))
    drop_a_table(script, server, "ops-agent", "ops-desk")

    with script.agent("ops-agent", "Look something up", "Done.") as root:
        script.chat([("lookup_customer", {"customer_id": "C-1"})])
        got = answer(
            server,
            trace_id_of(root),
            "lookup_customer",
            agent="ops-agent",
            service="ops-desk",
            version="1.0.0",
            headers={"Authorization": f"Bearer {TOKEN}"},
        )
        script.chat()
    provider.shutdown()
    assert (got["answer"], got["reasons"], got["decision"]) == (
        "deny",
        ["target_disabled"],
        "DISABLE",
    )
    # A run the guard has never seen is denied as well: the decision is about the target.
    unseen = answer(
        server,
        "ab" * 16,
        "lookup_customer",
        agent="ops-agent",
        service="ops-desk",
        version="1.0.0",
        headers={"Authorization": f"Bearer {TOKEN}"},
    )
    assert (unseen["answer"], unseen["reasons"]) == ("deny", ["target_disabled"])
    t = trajectory(server, trace_id_of(root))
    assert ("tool", "lookup_customer") not in steps(t)
    assert ("policy", "guard lookup_customer") in steps(t)


def test_spans_not_exported_yet_are_never_judged_silently(server: RunningServer) -> None:
    """With the SDK's batching processor, the guard sees the run only once it is flushed: an
    unknown run, then a partial one (the model call that asked for the write is not there),
    are the pack's `guard.on_unknown` (review); flushed, the write is judged."""
    provider = TracerProvider(
        resource=Resource.create({"service.name": "support-desk", "service.version": "5.2.0"})
    )
    provider.add_span_processor(BatchSpanProcessor(exporter(server), schedule_delay_millis=60_000))
    script = AgentScript(provider.get_tracer("support"))
    headers = {"Authorization": f"Bearer {TOKEN}"}
    with script.agent("support-agent", "Change the e-mail of C-2002", "Done.") as root:
        trace_id = trace_id_of(root)
        script.chat([("lookup_customer", {"customer_id": "C-2002"})])
        lookup = {"arguments": {"customer_id": "C-2002"}, "headers": headers}
        unknown = answer(server, trace_id, "lookup_customer", **lookup)
        assert (unknown["answer"], unknown["reasons"]) == ("review", ["guard_run_unknown"])
        script.tool("lookup_customer", {"customer_id": "C-2002"}, '{"tier": "gold"}')
        assert provider.force_flush()

        # the model call that asks for the write has ended, and is not exported yet
        script.chat([("update_account", WRITE)])
        call = {"arguments": WRITE, "tool_call_id": f"call_{script.turn - 1}_0", "headers": headers}
        partial = answer(server, trace_id, "update_account", **call)
        assert (partial["answer"], partial["reasons"]) == ("review", ["guard_run_partial"])

        assert provider.force_flush()
        judged = answer(server, trace_id, "update_account", **call)
        assert (judged["answer"], judged["reasons"]) == ("deny", ["approval_boundary_violation"])
        script.chat()
    provider.shutdown()
    assert scraped(server, "sextant_guard_answers_total", answer="review", basis="unknown") == 2


def test_a_guard_reads_only_its_own_service_and_takes_the_otlp_token(
    server: RunningServer,
) -> None:
    trace_id, _ = account_change(server, "5.3.0", approve=False)
    unauthenticated = ask(server, trace_id, "update_account", headers={})
    assert unauthenticated.status_code == 401
    assert unauthenticated.headers["WWW-Authenticate"].startswith("Bearer")
    wrong = ask(server, trace_id, "update_account", headers={"Authorization": "Bearer nope"})
    assert wrong.status_code == 401

    # Another service naming this run learns nothing of it: its run is unknown.
    other = answer(
        server,
        trace_id,
        "update_account",
        arguments=WRITE,
        service="billing-desk",
        agent="billing-agent",
        headers={"Authorization": f"Bearer {TOKEN}"},
    )
    assert (other["answer"], other["reasons"], other["evidence"]) == (
        "review",
        ["guard_run_unknown"],
        [],
    )


def test_bad_guard_calls_are_refused_with_what_to_fix(server: RunningServer) -> None:
    headers = {"Authorization": f"Bearer {TOKEN}"}
    reply = ask(server, "not-a-trace-id", "update_account", headers=headers)
    assert reply.status_code == 400
    assert "trace_id" in reply.json()["error"]


def test_the_guard_answers_over_grpc_with_the_otlp_token(server: RunningServer) -> None:
    provider = provider_for(exporter(server), service="support-desk", version="5.4.0")
    script = AgentScript(provider.get_tracer("support"))
    with script.agent("support-agent", "Change the e-mail of C-2002", "Done.") as root:
        script.chat([("update_account", WRITE)])
        request = wire.CheckRequest(
            trace_id=trace_id_of(root),
            parent_span_id=span_id(root),
            service="support-desk",
            agent="support-agent",
            version="5.4.0",
            tool=wire.ProposedCall(
                name="update_account",
                arguments_json=json.dumps(WRITE),
                tool_call_id=f"call_{script.turn - 1}_0",
            ),
        )
        got = ask_grpc(server, request, TOKEN)
        with pytest.raises(Exception, match="UNAUTHENTICATED"):
            ask_grpc(server, request, None)
        script.chat()
    provider.shutdown()
    assert (got.answer, list(got.reasons)) == ("deny", ["approval_boundary_violation"])
    assert scraped(server, "sextant_guard_calls_total", protocol="grpc")


def test_a_run_kept_natively_is_answered_in_the_grpc_listener(server: RunningServer) -> None:
    """After the first call about a run, the gRPC listener answers the next ones in its own
    threads, off the event loop: the same answers as Python's, each recorded as a step of the
    run, the token still checked, another service still blind to the run, and a decision that
    fires since applied at once."""

    def listened() -> float:
        return scraped(server, "sextant_guard_runs_total", how="listener") or 0.0

    provider = provider_for(exporter(server), service="listen-desk", version="1.0.0")
    script = AgentScript(provider.get_tracer("listen"))
    with script.agent("listen-agent", "Look up C-1", "Done.") as root:
        script.chat([("lookup_customer", {"customer_id": "C-1"})])

        def check(tool: str, service: str = "listen-desk", token: str | None = TOKEN) -> Any:
            request = wire.CheckRequest(
                trace_id=trace_id_of(root),
                parent_span_id=span_id(root),
                service=service,
                version="1.0.0",
                tool=wire.ProposedCall(name=tool, arguments_json='{"customer_id": "C-1"}'),
            )
            return ask_grpc(server, request, token)

        first = check("lookup_customer")  # weighed in Python, and the run kept from here on
        before = listened()
        looked = [check("lookup_customer") for _ in range(5)]
        dropped = check("drop_table")
        wait_for(lambda: listened() > before)
        with pytest.raises(grpc.RpcError) as refused:
            check("lookup_customer", token="not-the-token")
        assert refused.value.code() == grpc.StatusCode.UNAUTHENTICATED
        other = check("lookup_customer", service="other-desk")
        script.chat()
    provider.shutdown()
    said = [(g.answer, list(g.reasons), g.decision) for g in [first, *looked]]
    assert said == [("allow", [], "PASS")] * 6
    assert (dropped.answer, list(dropped.reasons)) == ("deny", ["destructive_tool"])
    assert dropped.span_id in dropped.evidence
    assert (other.answer, list(other.reasons)) == ("review", ["guard_run_unknown"])
    # every answer is a step of the run, the listener's as Python's
    t = trajectory(server, trace_id_of(root))
    guard_steps = {s["span_id"] for s in t["steps_detail"] if s["kind"] == "policy"}
    assert {g.span_id for g in [first, *looked, dropped]} <= guard_steps

    # a DISABLE that fires since is the answer from the next call on
    ran = provider_for(exporter(server), service="listen-desk", version="1.0.0")
    drop_a_table(AgentScript(ran.get_tracer("listen")), server, "listen-agent", "listen-desk")
    ran.shutdown()
    disabled = [check("lookup_customer") for _ in range(3)]  # the first run, still kept
    assert {(g.answer, tuple(g.reasons)) for g in disabled} == {("deny", ("target_disabled",))}


def test_past_its_deadline_the_guard_answers_what_the_pack_says(tmp_path: Path) -> None:
    packs: dict[str, str | Path] = {
        "support-agent": SHIPPED_PACKS / "support-agent.yaml",
        "lenient": LENIENT_PACK,
    }
    server = serve(tmp_path, packs, assembler=FAST, guard={"deadline_seconds": 1e-9})
    try:
        strict = answer(server, "cd" * 16, "update_account", arguments=WRITE)
        # another run: the first call's own step, once held, is judged without a thread
        lenient = answer(
            server, "ce" * 16, "drop_table", service="lenient-desk", agent="lenient-agent"
        )
        assert (strict["answer"], strict["reasons"]) == ("deny", ["guard_unavailable_deadline"])
        assert (lenient["answer"], lenient["reasons"]) == ("allow", ["guard_unavailable_deadline"])
        assert scraped(server, "sextant_guard_timeouts_total", reason="deadline") == 2
        assert scraped(server, "sextant_guard_answers_total", answer="deny", basis="unavailable")
    finally:
        server.stop()


def test_a_malformed_grpc_guard_call_is_invalid_argument(server: RunningServer) -> None:
    with grpc.insecure_channel(server.grpc_endpoint) as channel:
        check = channel.unary_unary(f"/{wire.SERVICE}/Check")
        metadata = [("authorization", f"Bearer {TOKEN}")]
        for body in (b"\xff\xff\xff", wire.CheckRequest(trace_id="zz").SerializeToString()):
            with pytest.raises(grpc.RpcError) as caught:
                check(body, metadata=metadata, timeout=10)
            assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
            assert "bad guard call" in (caught.value.details() or "")


def test_the_guard_takes_post_only_and_can_be_switched_off(
    server: RunningServer, tmp_path: Path
) -> None:
    got = requests.get(f"{server.http_url}/v1/guard", timeout=10)
    assert (got.status_code, got.headers["Allow"]) == (405, "POST")
    off = serve(tmp_path, guard={"enabled": False})
    try:
        refused = ask(off, "ab" * 16, "lookup_customer")
        assert refused.status_code == 404
        assert "POST /v1/traces" in refused.text
    finally:
        off.stop()


def test_http_guard_calls_are_answered_in_the_listener_as_python_answers_them(
    server: RunningServer,
) -> None:
    """Once a run is kept, `POST /v1/guard` is answered in the native HTTP listener's threads;
    each body is also sent gzip-compressed, which only Python reads: the two answers agree,
    status and body, for calls the listener answers and for those it leaves to Python."""

    def listened() -> float:
        return scraped(server, "sextant_guard_runs_total", how="listener") or 0.0

    def post(body: dict[str, Any], compressed: bool) -> tuple[int, dict[str, Any]]:
        data = json.dumps(body).encode()
        headers = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"}
        if compressed:
            data, headers["Content-Encoding"] = gzip.compress(data), "gzip"
        reply = requests.post(f"{server.http_url}/v1/guard", data=data, headers=headers)
        said = reply.json()
        own = said.pop("span_id", None)  # the guard's step: a new one each call
        if own is not None:
            said["evidence"] = ["(own step)" if e == own else e for e in said["evidence"]]
            # each call's own step lengthens the run: the proposed call's place moves on
            said["messages"] = [re.sub(r"\(seq \d+\)", "(seq)", m) for m in said["messages"]]
        return reply.status_code, said

    def counted_since(seen: float) -> bool:
        """Whether the listener answered a call since `seen` (counted on the loop's next look)."""
        deadline = time.monotonic() + 0.5
        while listened() == seen and time.monotonic() < deadline:
            time.sleep(0.02)
        return listened() > seen

    def here(body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        """`body` answered in the listener, and the same answer from Python. A run whose
        spans changed since it was kept (the guard's steps that Python recorded arrive through
        ingest) is weighed by Python until the listener keeps it again: asked until then."""
        for _ in range(50):
            seen = listened()
            got = post(body, compressed=False)
            if counted_since(seen):
                assert got == post(body, compressed=True), body
                return got
        raise AssertionError(f"the listener never answered {body}")

    provider = provider_for(exporter(server), service="support-desk", version="7.0.0")
    script = AgentScript(provider.get_tracer("support"))
    with script.agent("support-agent", "Change the e-mail of C-2002", "Done.") as root:
        script.chat([("lookup_customer", {"customer_id": "C-2002"})])
        script.tool("lookup_customer", {"customer_id": "C-2002"}, '{"tier": "gold"}')
        script.chat([("update_account", WRITE)])
        write = {
            "name": "update_account",
            "arguments": WRITE,
            "tool_call_id": f"call_{script.turn - 1}_0",
        }
        call = {
            "trace_id": trace_id_of(root),
            "parent_span_id": span_id(root),
            "service": "support-desk",
            "agent": "support-agent",
            "version": "7.0.0",
            "tool": write,
        }
        assert post(call, compressed=False)[0] == 200  # weighed in Python; kept from here on
        lookup = {"name": "lookup_customer", "arguments": {"customer_id": "C-2002"}}
        nested = {"customer": {"id": "C-2002", "tags": ["gold", "ünïcode"]}, "n": 2**64 - 1}
        answered_here = {
            "the write": call,
            "ids in upper case": {**call, "trace_id": call["trace_id"].upper()},
            "a read": {**call, "tool": lookup},
            "nested arguments": {**call, "tool": {**lookup, "arguments": nested}},
            "nulls": {**call, "version": None, "agent": None, "conversation_id": None},
        }
        left_to_python = {
            "a float argument": {**call, "tool": {**lookup, "arguments": {"amount": 1.5}}},
            "an empty agent": {**call, "agent": ""},
            "an MCP call": {**call, "tool": {**lookup, "kind": "mcp", "mcp_server": "crm"}},
            "an unknown key": {**call, "priority": 1},
            "no tool": {k: v for k, v in call.items() if k != "tool"},
            "a bad trace id": {**call, "trace_id": "xyz"},
            "a number for text": {**call, "service": 7},
        }
        said = {name: here(body) for name, body in answered_here.items()}
        before = listened()
        for name, body in left_to_python.items():
            assert post(body, compressed=False) == post(body, compressed=True), name
        script.chat()
    provider.shutdown()
    time.sleep(0.3)  # a call answered in the listener is counted on the loop's next look
    assert listened() == before
    statuses = {status for status, _ in said.values()}
    assert statuses == {200}
    assert said["the write"][1]["reasons"] == ["approval_boundary_violation"]
    assert said["a read"][1]["answer"] == "allow"


def test_runs_of_a_service_that_asks_are_kept_before_their_first_call(
    server: RunningServer,
) -> None:
    """Once a service has asked the guard, its runs that start later are kept natively as their
    spans load: the first call about one is answered in the listener like the next ones, and
    the answer is the same as for a run kept at its first call."""

    def count(name: str, **labels: str) -> float:
        return scraped(server, name, **labels) or 0.0

    def check(root: Any, tool: str) -> Any:
        request = wire.CheckRequest(
            trace_id=trace_id_of(root),
            parent_span_id=span_id(root),
            service="listen-desk",
            agent="ahead-agent",
            version="3.0.0",
            tool=wire.ProposedCall(name=tool, arguments_json='{"customer_id": "C-1"}'),
        )
        return ask_grpc(server, request, TOKEN)

    provider = provider_for(exporter(server), service="listen-desk", version="3.0.0")
    script = AgentScript(provider.get_tracer("ahead"))
    with script.agent("ahead-agent", "Look up C-1", "Done.") as asked_before:
        script.chat([("lookup_customer", {"customer_id": "C-1"})])
        check(asked_before, "lookup_customer")  # the service has asked the guard
        script.chat()
    kept_before = count("sextant_guard_runs_kept_ahead_total")
    with script.agent("ahead-agent", "Look up C-1 again", "Done.") as root:
        script.chat([("lookup_customer", {"customer_id": "C-1"})])
        wait_for(lambda: count("sextant_guard_runs_kept_ahead_total") > kept_before)
        on_loop = count("sextant_guard_runs_total", how="native")
        listened = count("sextant_guard_runs_total", how="listener")
        first, dropped = check(root, "lookup_customer"), check(root, "drop_table")
        wait_for(lambda: count("sextant_guard_runs_total", how="listener") == listened + 2)
        script.chat()
    provider.shutdown()
    assert count("sextant_guard_runs_total", how="native") == on_loop
    assert (first.answer, list(first.reasons)) == ("allow", [])
    assert (dropped.answer, list(dropped.reasons)) == ("deny", ["destructive_tool"])
