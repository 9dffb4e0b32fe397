"""Sessions sent by the real OTel SDK: turns grouped by `gen_ai.conversation.id`, an approval
whose lifetime ended before a later turn's write QUARANTINES the target with both turns as
evidence, idle sessions close and a late turn reopens them."""

from __future__ import annotations

import json
import time
from datetime import datetime
from pathlib import Path

import pytest
import requests
from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter

from tests.support.admin import decisions, firing, scraped, trajectory
from tests.support.agents import AgentScript, provider_for, trace_id_of
from tests.support.captures import send
from tests.support.cli import sextant
from tests.support.conversations import Call, Service
from tests.support.paths import TESTDATA
from tests.support.server import DECIDE_FAST, FAST, RunningServer, serve
from tests.support.wait import wait_for

PACK = """
name: support-sessions
version: "1"
owner: support-oncall
selector: {service: support-desk}
approvals: {tools: [request_approval]}
rules:
  - id: fresh-approval
    type: approval_lifetime
    description: An approval covers account writes for 10 minutes, for that customer only.
    writes: {kind: tool, name: "update_*"}
    max_age: 10m
    same_resource: ["$.customer"]
    reason: stale_approval
    on_fail: QUARANTINE
  - id: session-turns
    type: budget
    scope: session
    max_turns: 6
    reason: session_too_long
"""
IDLE_SECONDS = 2.0


@pytest.fixture
def server(tmp_path: Path):
    running = serve(
        tmp_path,
        {"sessions": PACK},
        assembler=FAST,
        decisions=DECIDE_FAST,
        sessions={"tick_seconds": 0.1, "idle_seconds": IDLE_SECONDS},
    )
    yield running
    running.stop()


class Conversation:
    """Turns of one conversation, each its own trace, from one SDK provider; a turn's spans may
    be stamped in the past (`ago` seconds), as an agent's clock would have stamped an old turn."""

    def __init__(self, server: RunningServer, conversation: str, version: str) -> None:
        exporter = OTLPSpanExporter(endpoint=server.grpc_endpoint, insecure=True)
        self.provider = provider_for(exporter, service="support-desk", version=version)
        self.conversation = conversation

    def turn(
        self, question: str, write: bool = False, approve: bool = False, ago: float = 0.0
    ) -> str:
        tracer = self.provider.get_tracer("support")
        clock = time.time_ns() - int(ago * 1e9)
        attrs = {"gen_ai.conversation.id": self.conversation}
        root = tracer.start_span(
            "invoke_agent support-agent",
            start_time=clock,
            attributes={
                **attrs,
                "gen_ai.operation.name": "invoke_agent",
                "gen_ai.agent.name": "support-agent",
                "gen_ai.input.messages": json.dumps(
                    [{"role": "user", "parts": [{"type": "text", "content": question}]}]
                ),
            },
        )
        calls = [("lookup_customer", {"customer": "C-1"}, '{"tier": "gold"}')]
        if approve:
            calls.append(("request_approval", {"customer": "C-1"}, '{"approved": true}'))
        if write:
            calls.append(("update_account", {"customer": "C-1", "email": "m@x.org"}, "ok"))
        inside = trace.set_span_in_context(root)
        for name, arguments, result in calls:
            clock += 2_000_000
            tool = tracer.start_span(
                f"execute_tool {name}",
                context=inside,
                start_time=clock,
                attributes={
                    **attrs,
                    "gen_ai.operation.name": "execute_tool",
                    "gen_ai.tool.name": name,
                    "gen_ai.tool.call.arguments": json.dumps(arguments),
                    "gen_ai.tool.call.result": result,
                },
            )
            clock += 2_000_000
            tool.end(end_time=clock)
        root.end(end_time=clock + 1_000_000)
        self.provider.force_flush()
        return format(root.get_span_context().trace_id, "032x")


def session(server: RunningServer, session_id: str, **expect: object) -> dict:
    def fetch() -> dict | None:
        reply = requests.get(f"{server.admin_url}/api/v1/sessions/{session_id}", timeout=5)
        if reply.status_code != 200:
            return None
        found = reply.json()
        return found if all(found[k] == v for k, v in expect.items()) else None

    return wait_for(fetch, timeout=15)


def test_a_write_after_the_approvals_lifetime_is_quarantined_with_both_turns(
    server: RunningServer, capsys: pytest.CaptureFixture[str]
) -> None:
    stale = Conversation(server, "conv-stale", "2.0.0")
    renewed = Conversation(server, "conv-renewed", "2.0.1")
    # The first turns 20 and 15 minutes ago; the approvals' lifetime is 10 minutes.
    approved = stale.turn("Change my e-mail.", write=True, approve=True, ago=1200)
    renewed_first = renewed.turn("Change my e-mail.", write=True, approve=True, ago=1200)
    asked = stale.turn("What is the refund policy?", ago=900)
    renewed.turn("What is the refund policy?", ago=900)
    written = stale.turn("Set it again.", write=True)
    renewed_last = renewed.turn("Set it again.", write=True, approve=True)

    d = firing(server, "QUARANTINE", service_version="2.0.0")
    assert d["reasons"] == ["stale_approval"]
    assert set(d["evidence_trace_ids"]) == {approved, written}
    assert d["owner"] == "support-oncall"

    found = session(server, "conv-stale", turns=3)
    assert found["trace_ids"] == [approved, asked, written]
    assert (found["status"], found["verdict"]) == ("open", "fail")
    assert found["verdict_rules"] == ["support-sessions/fresh-approval"]
    fail = next(r for r in found["results"] if r["verdict"] == "fail")
    assert fail["evidence_trace_ids"] == [approved, written]
    assert fail["trace_id"] == written and fail["scope"] == "session"
    assert "not covered by an approval" in fail["message"] and "s old" in fail["message"]
    # The failing turn shows the session result that names it, with the write as evidence.
    t = trajectory(server, written)
    write = next(s for s in t["steps_detail"] if s["name"] == "update_account")
    shown = next(r for r in t["results"] if r["rule_id"] == "fresh-approval")
    assert write["span_id"] in shown["evidence_span_ids"]

    # The renewed approval covers its write: the session passes, no decision for its target.
    other = session(server, "conv-renewed", turns=3)
    assert other["verdict"] == "pass", other["results"]
    assert other["trace_ids"][0] == renewed_first and other["trace_ids"][-1] == renewed_last
    rounds = scraped(server, "sextant_decision_evaluations_total") or 0
    wait_for(lambda: (scraped(server, "sextant_decision_evaluations_total") or 0) >= rounds + 2)
    assert [x for x in decisions(server) if x["service_version"] == "2.0.1"] == []

    code, out = sextant(capsys, "show", "--session", "conv-stale", "--url", server.admin_url)
    assert code == 0
    assert "3 turns" in out and approved in out and written in out
    assert "fail   support-sessions/fresh-approval stale_approval" in out


def test_idle_sessions_close_and_a_late_turn_reopens_them(server: RunningServer) -> None:
    talk = Conversation(server, "conv-late", "2.1.0")
    first = talk.turn("Hello.")
    closed = session(server, "conv-late", status="closed")
    assert closed["turns"] == 1 and closed["closed_at"] is not None
    listed = requests.get(
        f"{server.admin_url}/api/v1/sessions", params={"status": "closed"}, timeout=5
    ).json()["sessions"]
    assert [s["session_id"] for s in listed] == ["conv-late"]

    second = talk.turn("One more thing.")
    reopened = session(server, "conv-late", status="open", turns=2)
    assert reopened["trace_ids"] == [first, second]
    assert reopened["reopened"] == 1 and reopened["closed_at"] is None
    bad = requests.get(f"{server.admin_url}/api/v1/sessions", params={"state": "x"}, timeout=5)
    assert bad.status_code == 400 and "unknown parameter 'state'" in bad.json()["error"]
    missing = requests.get(f"{server.admin_url}/api/v1/sessions/nope", timeout=5)
    assert missing.status_code == 404


def test_a_configured_attribute_names_the_session(tmp_path: Path) -> None:
    """`sessions.attribute` is looked for on every span, before the conventions' ids, and
    names the session of a run that has none of them."""
    running = serve(
        tmp_path, assembler=FAST, sessions={"tick_seconds": 0.1, "attribute": "app.thread"}
    )
    try:
        exporter = OTLPSpanExporter(endpoint=running.grpc_endpoint, insecure=True)
        provider = provider_for(exporter, service="support-desk")
        traces = []
        for question in ("Hello.", "Again."):
            script = AgentScript(provider.get_tracer("support"))
            # the second run has no conventional id at all: the attribute alone names it
            root_attrs = {"gen_ai.conversation.id": "per-run-id"} if question == "Hello." else {}
            with script.agent("support-agent", question, "Done.", **root_attrs) as root:
                script.tool("lookup_customer", {"customer": "C-1"}, **{"app.thread": "t-1"})
            traces.append(trace_id_of(root))
        provider.force_flush()
        assert session(running, "t-1", turns=2)["trace_ids"] == traces
    finally:
        running.stop()


def test_a_restart_neither_reopens_nor_recounts_its_sessions(tmp_path: Path) -> None:
    sections = {"assembler": FAST, "sessions": {"tick_seconds": 0.1, "idle_seconds": 3600}}
    running = serve(tmp_path, {"sessions": PACK}, **sections)
    talk = Conversation(running, "conv-restart", "2.2.0")
    first = talk.turn("Hello.")
    second = talk.turn("Again.")
    before = session(running, "conv-restart", turns=2)
    running.stop()
    again = serve(tmp_path, {"sessions": PACK}, **sections)
    try:
        # The stage's first tick looks back over the stored runs (and counts the open ones).
        wait_for(lambda: scraped(again, "sextant_sessions_open") == 1)
        after = session(again, "conv-restart")
        assert after["trace_ids"] == [first, second]
        assert (after["reopened"], after["last_turn_at"]) == (0, before["last_turn_at"])
        assert scraped(again, "sextant_session_turns_total") == 0  # none counted twice
        third = Conversation(again, "conv-restart", "2.2.0").turn("Once more.")
        assert session(again, "conv-restart", turns=3)["trace_ids"] == [first, second, third]
    finally:
        again.stop()


def test_a_long_session_is_read_from_its_latest_turns_in_order(tmp_path: Path) -> None:
    running = serve(
        tmp_path,
        {"sessions": PACK},
        assembler=FAST,
        sessions={"tick_seconds": 0.1, "max_turns": 2},
    )
    try:
        talk = Conversation(running, "conv-long", "2.3.0")
        # One approval, then writes: over two turns it would be covered, but the approval's
        # turn is outside the two read, so the rule cannot say: a review, not a failure.
        traces = [talk.turn("Change it.", approve=True, write=True, ago=60)]
        for n in range(3):
            traces.append(talk.turn(f"Again {n}.", write=True, ago=50 - 10 * n))
            found = session(running, "conv-long", turns=len(traces))
            assert found["trace_ids"] == traces  # in the order they began, every tick
        rule = next(r for r in reversed(found["results"]) if r["rule_id"] == "fresh-approval")
        assert (rule["verdict"], rule["reason"]) == ("review", "session_truncated")
    finally:
        running.stop()


CAPTURED_PACK = """
name: support-sessions
version: "1"
owner: support-oncall
selector: {service: support-desk}
approvals: {tools: [request_approval]}
rules:
  - id: fresh-approval
    type: approval_lifetime
    writes: {kind: tool, name: "update_*"}
    max_turns: 1
    same_resource: ["$.customer_id"]
    reason: stale_approval
    on_fail: QUARANTINE
"""
CAPTURED = sorted((TESTDATA / "otlp-multi").glob("langgraph-*-session_*.otlp.json"))


@pytest.mark.parametrize("path", CAPTURED, ids=lambda p: p.name.split(".")[0])
def test_captured_langgraph_threads_are_sessions(tmp_path: Path, path: Path) -> None:
    """LangGraph threads as OpenInference and OpenLLMetry export them (`session.id`;
    `gen_ai.conversation.id` on the root, association properties on the rest)."""
    running = serve(
        tmp_path,
        {"sessions": CAPTURED_PACK},
        assembler=FAST,
        decisions=DECIDE_FAST,
        sessions={"tick_seconds": 0.1},
    )
    try:
        send(running, path, "grpc" if "openinference" in path.name else "http/json")
        thread = "thread-7f3a" if "stale" in path.name else "thread-9c21"
        found = session(running, thread, turns=3)
        first, asked, written = found["trace_ids"]
        retrieval = trajectory(running, asked)
        (step,) = [s for s in retrieval["steps_detail"] if s["kind"] == "retrieval"]
        assert [d["score"] for d in step["documents"]] == [0.82, 0.64]
        if "renewed" in path.name:
            assert found["verdict"] == "pass", found["results"]
            assert decisions(running) == []
            return
        assert found["verdict"] == "fail"
        d = firing(running, "QUARANTINE", service_name="support-desk")
        assert d["reasons"] == ["stale_approval"]
        assert set(d["evidence_trace_ids"]) == {first, written}
    finally:
        running.stop()


ONCE_PACK = """
name: session-limits
version: "1"
owner: support-oncall
selector: {service: support-desk}
rules:
  - id: session-turns
    type: budget
    scope: session
    max_turns: 2
    reason: session_too_long
  - id: session-tools
    type: budget
    scope: session
    max_tool_calls: 3
    reason: session_over_budget
  - id: failing-tools
    type: repeated_failures
    min_turns: 2
    reason: repeated_tool_failure
"""


def test_a_session_gone_over_its_budget_stores_one_failure(tmp_path: Path) -> None:
    """Every later turn finds the same breach: the turn that went over, not the latest."""
    running = serve(
        tmp_path, {"sessions": ONCE_PACK}, assembler=FAST, sessions={"tick_seconds": 0.1}
    )
    try:
        agent = Service(running, "support-desk", "2.4.0")
        lookup = Call("lookup_customer", {"customer": "C-1"}, '{"tier": "gold"}')
        fails = Call("charge_card", {"customer": "C-1"}, error="CardDeclined")
        traces = []
        for n in range(5):
            traces.append(agent.turn("conv-over", [lookup, fails], ago=50 - 10 * n))
            session(running, "conv-over", turns=n + 1)  # each turn judged on its own tick
        failures = running.query_dicts(
            "SELECT rule_id, trace_id, evidence_trace_ids FROM results"
            " WHERE session_id = 'conv-over' AND verdict = 'fail' ORDER BY rule_id"
        )
        assert [(f["rule_id"], f["trace_id"]) for f in failures] == [
            ("failing-tools", traces[1]),
            ("session-tools", traces[1]),
            ("session-turns", traces[2]),
        ]
        assert failures[0]["evidence_trace_ids"] == traces[:2]
    finally:
        running.stop()


def test_a_conversation_without_session_rules_is_one_row_of_its_turns_totals(
    tmp_path: Path,
) -> None:
    """No pack has a session rule: each turn, sent after the one before, is handed to the
    session stage as it is stored and wakes it (it looks for idle sessions once a minute);
    the row sums the turns' own totals."""
    running = serve(tmp_path, assembler=FAST, sessions={"tick_seconds": 60})
    try:
        exporter = OTLPSpanExporter(endpoint=running.grpc_endpoint, insecure=True)
        provider = provider_for(exporter, service="support-desk", version="2.5.0")
        traces = []
        for n, question in enumerate(("Hello.", "Where is my order?", "Refund it.")):
            script = AgentScript(provider.get_tracer("support"))
            ids = {"gen_ai.conversation.id": "conv-totals", "enduser.id": "mira"}
            with script.agent("support-agent", question, "Done.", **ids) as root:
                script.chat([("lookup_order", {"order": 42})])
                script.tool("lookup_order", {"order": 42}, error="Timeout" if n == 1 else None)
                script.chat()
            provider.force_flush()
            traces.append(trace_id_of(root))
            found = session(running, "conv-totals", turns=n + 1)
        assert found["trace_ids"] == traces
        runs = [trajectory(running, t) for t in traces]
        for total in ("steps", "tool_calls", "llm_calls", "input_tokens", "output_tokens"):
            assert found[total] == sum(r[total] for r in runs), total
        assert found["error_count"] == 1 and found["llm_calls"] == 6
        assert found["cost_usd"] == pytest.approx(sum(r["cost_usd"] for r in runs))
        assert (found["user_id"], found["service_version"]) == ("mira", "2.5.0")
        started = datetime.fromisoformat(found["started_at"]).timestamp()
        assert started == pytest.approx(runs[0]["start_time_unix_nano"] / 1e9, abs=2e-6)
        assert (found["status"], found["verdict"], found["results"]) == ("open", "none", [])
    finally:
        running.stop()
