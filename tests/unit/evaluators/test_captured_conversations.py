"""Session, retrieval and MCP rules on captures recorded for them (tests/testdata/otlp-multi):
LangGraph conversations of three turns on one thread under OpenInference and OpenLLMetry, and
MCP tool calls traced by the Python MCP SDK itself and by OpenLLMetry. Each rule type passes
and fails on what the instrumentation really wrote, with its evidence."""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import replace
from pathlib import Path

import orjson
import pytest

from collector.assembler.build import build_trajectory
from collector.assembler.prices import PriceTable
from collector.normalize.wire import decode_request
from evaluators.base import Verdict
from evaluators.documents import documents
from evaluators.evaluate import evaluate_pack, evaluate_session_pack
from evaluators.model import Trajectory
from evaluators.rulepack import RulePack
from evaluators.sessions import Session
from tests.support.paths import TESTDATA

MULTI = TESTDATA / "otlp-multi"
SESSIONS = sorted(MULTI.glob("langgraph-*-session_*.otlp.json"))
STALE = [p for p in SESSIONS if "stale" in p.name]
RENEWED = [p for p in SESSIONS if "renewed" in p.name]
PRICES = PriceTable.load()


def traces(body: bytes) -> list[Trajectory]:
    """Every trace of an OTLP/JSON body, built, in the order they started."""
    rows = decode_request("traces", "json", body, 1 << 22).table.to_pylist()
    by_trace: dict[str, list[dict]] = defaultdict(list)
    for row in rows:
        by_trace[row["trace_id"]].append(row)
    built = [build_trajectory(t, spans, PRICES) for t, spans in by_trace.items()]
    return sorted(built, key=lambda t: t.start_time_unix_nano)


def runs(path: Path) -> list[Trajectory]:
    """Every agent run in the file, in the order they started."""
    return [t for t in traces(path.read_bytes()) if t.agent_run]


def conversation(path: Path) -> Session:
    turns = [t for t in runs(path) if t.conversation_id]
    (thread,) = {t.conversation_id for t in turns}
    return Session(thread, turns)


def pack(*rules: dict[str, object]) -> RulePack:
    return RulePack.model_validate(
        {
            "name": "captured",
            "version": "1",
            "owner": "support-oncall",
            "approvals": {"tools": ["request_approval"]},
            "rules": [{"reason": "violation", **r} for r in rules],
        }
    )


def names(t: Trajectory | Session, evidence: tuple[str, ...]) -> list[str]:
    steps = [s for run in getattr(t, "turns", [t]) for s in run.steps]
    by_span = {s.span_id: s.name for s in steps}
    return [by_span[e] for e in evidence]


@pytest.mark.parametrize("path", SESSIONS, ids=lambda p: p.stem.removesuffix(".otlp"))
def test_each_turn_is_one_run_of_the_thread_with_its_own_request(path: Path) -> None:
    session = conversation(path)
    assert session.session_id in ("thread-7f3a", "thread-9c21")
    assert [t.input for t in session.turns] == [
        "Change the e-mail of customer C-1042 to mira@example.org.",
        "What is the refund policy for gold customers?",
        "Also set it to mira.k@example.org.",
    ]
    writes = [[s.name for s in t.steps if s.name == "update_account"] for t in session.turns]
    assert writes == [["update_account"], [], ["update_account"]]


LIFETIME = {
    "id": "fresh-approval",
    "type": "approval_lifetime",
    "writes": {"kind": "tool", "name": "update_*"},
    "same_resource": ["$.customer_id"],
}


@pytest.mark.parametrize("path", STALE, ids=lambda p: p.stem.removesuffix(".otlp"))
def test_a_third_turn_write_on_a_first_turn_approval_fails(path: Path) -> None:
    session = conversation(path)
    first, _, third = session.turns
    for limit in ({"max_turns": 1}, {"max_age": "1s"}):
        (result,) = evaluate_session_pack(session, pack({**LIFETIME, **limit}))
        assert result.verdict == Verdict.FAIL, result.message
        assert names(session, result.evidence) == ["request_approval", "update_account"]
        assert result.traces == (first.trace_id, third.trace_id)
    # Within a lifetime long enough, the first approval covers the same customer's write.
    (result,) = evaluate_session_pack(session, pack({**LIFETIME, "max_turns": 3}))
    assert result.verdict == Verdict.PASS, result.message


@pytest.mark.parametrize("path", RENEWED, ids=lambda p: p.stem.removesuffix(".otlp"))
def test_a_renewed_approval_passes(path: Path) -> None:
    session = conversation(path)
    for limit in ({"max_turns": 1}, {"max_age": "1s"}):
        (result,) = evaluate_session_pack(session, pack({**LIFETIME, **limit}))
        assert result.verdict == Verdict.PASS, result.message


@pytest.mark.parametrize("path", SESSIONS, ids=lambda p: p.stem.removesuffix(".otlp"))
def test_session_budgets_over_the_captured_turns(path: Path) -> None:
    session = conversation(path)
    budget = {"id": "b", "type": "budget", "scope": "session"}
    (result,) = evaluate_session_pack(session, pack({**budget, "max_turns": 2}))
    assert (result.verdict, result.message) == (Verdict.FAIL, "over budget: turns 3 > 2")
    assert result.traces == (session.turns[-1].trace_id,)
    tokens = sum(t.input_tokens + t.output_tokens for t in session.turns)
    (result,) = evaluate_session_pack(session, pack({**budget, "max_tokens": tokens}))
    assert result.verdict == Verdict.PASS
    (result,) = evaluate_session_pack(session, pack({**budget, "max_tokens": tokens - 1}))
    assert result.verdict == Verdict.FAIL and f"tokens {tokens:g}" in result.message


def retrieval_turn(path: Path) -> Trajectory:
    return conversation(path).turns[1]


@pytest.mark.parametrize("path", SESSIONS, ids=lambda p: p.stem.removesuffix(".otlp"))
def test_the_retrieval_carries_its_documents(path: Path) -> None:
    (step,) = [s for s in retrieval_turn(path).steps if s.kind == "retrieval"]
    docs = documents(step)
    assert [d.score for d in docs] == [0.82, 0.64]
    assert [d.metadata["access"] for d in docs] == ["internal", "internal"]
    assert all(d.content_length and d.content_length > 50 for d in docs)
    # OpenInference has the ids (in the retriever's output); OpenLLMetry records none.
    expected = [None, None] if "openllmetry" in path.name else ["kb-101", "kb-207"]
    assert [d.id for d in docs] == expected


@pytest.mark.parametrize("path", SESSIONS, ids=lambda p: p.stem.removesuffix(".otlp"))
def test_retrieval_rules_on_the_captured_documents(path: Path) -> None:
    t = retrieval_turn(path)
    rule = {"id": "grounded", "type": "retrieval"}

    def verdict(**fields: object) -> tuple[Verdict, str, list[str]]:
        (result,) = evaluate_pack(t, pack({**rule, **fields}))
        return result.verdict, result.message, names(t, result.evidence)

    assert verdict(min_documents=2, min_score=0.6)[0] == Verdict.PASS
    found, message, shown = verdict(min_documents=2, min_score=0.7)
    assert found == Verdict.FAIL and "1 document(s) scoring 0.7 or more, fewer than 2" in message
    assert len(shown) == 1  # the retrieval step
    # Updated 2026-10-01, retrieved 2026-12-02: 62 days old.
    assert verdict(max_age="90d")[0] == Verdict.PASS
    found, message, _ = verdict(max_age="30d")
    assert found == Verdict.FAIL and "2 document(s) older than 30d: " in message
    assert verdict(access={"allowed": ["public", "internal"]})[0] == Verdict.PASS
    found, message, _ = verdict(access={"allowed": ["public"]})
    assert found == Verdict.FAIL and "beyond their access" in message
    found, _, _ = verdict(access={"allowed": ["public"], "users": {"*": ["internal"]}})
    assert found == Verdict.FAIL  # the run names no user: no user's extra labels apply
    assert verdict(access={"label": "$.clearance", "allowed": ["public"]})[0] == Verdict.REVIEW
    # The turn that answered without retrieving anything.
    first = conversation(path).turns[0]
    (result,) = evaluate_pack(first, pack({**rule, "min_documents": 1}))
    assert result.verdict == Verdict.FAIL and "before the answer" in result.message
    # ...which rules about documents alone do not judge.
    only_access = {**rule, "before_answer": False, "access": {"allowed": ["public"]}}
    (result,) = evaluate_pack(first, pack(only_access))
    assert result.verdict == Verdict.NOT_APPLICABLE


@pytest.mark.parametrize("path", SESSIONS[:1], ids=lambda p: p.stem.removesuffix(".otlp"))
def test_documents_the_retrieval_does_not_show_are_reviewed(path: Path) -> None:
    t = retrieval_turn(path)
    (step,) = [s for s in t.steps if s.kind == "retrieval"]
    keys = [k for k in step.attributes if k.startswith("retrieval.documents.")]
    bare = replace(step, attributes_json=orjson.dumps({}).decode(), _attributes=None)
    empty = replace(t, steps=[bare if s is step else s for s in t.steps])
    assert keys  # the capture has them; the copy has none
    for fields in ({"max_age": "90d"}, {"access": {"allowed": ["internal"]}}):
        (result,) = evaluate_pack(empty, pack({"id": "r", "type": "retrieval", **fields}))
        assert (result.verdict, result.reason) == (Verdict.REVIEW, "document_unknown")
    # One document scored 0.82 and one without a score, two needed at 0.6: it could go either way.
    first, second = documents(step)
    assert (first.score, second.score) == (0.82, 0.64)
    metadata = json.loads(step.attributes["retrieval.documents.1.document.metadata"])
    del metadata["score"]
    attrs = {**step.attributes, "retrieval.documents.1.document.metadata": json.dumps(metadata)}
    half = replace(step, attributes_json=orjson.dumps(attrs).decode(), _attributes=None)
    mixed = replace(t, steps=[half if s is step else s for s in t.steps])
    rule = {"id": "r", "type": "retrieval", "min_documents": 2, "min_score": 0.6}
    (result,) = evaluate_pack(mixed, pack(rule))
    assert (result.verdict, result.reason) == (Verdict.REVIEW, "document_unknown")
    (result,) = evaluate_pack(mixed, pack({**rule, "min_score": 0.9}))
    assert result.verdict == Verdict.FAIL  # even scored, the second could not make two


def mcp_runs(name: str) -> list[Trajectory]:
    return [t for t in runs(MULTI / name) if t.agent_name == "support-agent" and t.steps[1:]]


def mcp_run(name: str) -> Trajectory:
    (run,) = mcp_runs(name)
    return run


def client_only(name: str) -> bytes:
    """The capture without the MCP server's own Export requests (its spans answer a remote
    parent): what arrives from an agent whose MCP server is not traced."""
    doc = json.loads((MULTI / name).read_text())
    doc["resourceSpans"] = [
        rs
        for rs in doc["resourceSpans"]
        if not any(s.get("flags") == 768 for ss in rs["scopeSpans"] for s in ss["spans"])
    ]
    return json.dumps(doc).encode()


def named(name: str, server: str) -> bytes:
    """The capture with its MCP server process exporting under `server`, as a server that
    sets its own service.name does (the recorded one kept the agent's)."""
    doc = json.loads((MULTI / name).read_text())
    for rs in doc["resourceSpans"]:
        if any(s.get("flags") == 768 for ss in rs["scopeSpans"] for s in ss["spans"]):
            for attr in rs["resource"]["attributes"]:
                if attr["key"] == "service.name":
                    attr["value"] = {"stringValue": server}
    return json.dumps(doc).encode()


def agent_run(body: bytes) -> Trajectory:
    (run,) = [t for t in traces(body) if t.agent_run]
    return run


@pytest.mark.parametrize(
    ("name", "server"),
    [
        ("mcp-openllmetry-crm_server.otlp.json", "crm-server"),
        ("mcp-mcp_sdk-impostor.otlp.json", "evil-mcp"),
        ("mcp-mcp_sdk-crm_tools.otlp.json", None),
        ("mcp-openllmetry-crm_tools.otlp.json", None),
    ],
)
def test_each_mcp_call_is_one_tool_step_named_by_its_server(name: str, server: str | None) -> None:
    """The server's own spans name it by their resource: the SDK's SERVER spans, and under
    OpenLLMetry (every span INTERNAL) the server's answer writer. The two crm_tools captures'
    server exported under the agent's own service.name, which names no server apart."""
    t = mcp_runs(name)[0]
    calls = [s for s in t.steps if s.is_tool_call]
    assert [s.tool_name for s in calls] == ["lookup_customer", "update_account"]
    assert calls[0].arguments == {"customer_id": "C-1042"}
    assert all(s.mcp is not None and s.mcp["method"] == "tools/call" for s in calls)
    assert [(s.mcp or {}).get("server") for s in calls] == [server, server]
    if server is not None:
        assert {(s.mcp or {}).get("server_source") for s in calls} == {"server"}
    if "mcp_sdk" in name:  # the SDK's server spans say which protocol version was agreed
        assert {s.mcp["protocol_version"] for s in calls if s.mcp} == {"2025-11-25"}


def test_mcp_allow_lists_on_the_sdk_capture() -> None:
    t = agent_run(named("mcp-mcp_sdk-crm_tools.otlp.json", "crm-server"))
    rule = {"id": "mcp", "type": "mcp"}

    def verdict(**fields: object) -> tuple[Verdict, str, list[str]]:
        (result,) = evaluate_pack(t, pack({**rule, **fields}))
        return result.verdict, result.message, names(t, result.evidence)

    assert verdict(servers=["crm-*"], tools=["lookup_*", "update_*"])[0] == Verdict.PASS
    found, message, shown = verdict(servers=["billing-*"])
    assert found == Verdict.FAIL and "on server crm-server, which is not allowed" in message
    assert len(shown) == 2
    found, message, shown = verdict(tools={"crm-server": ["lookup_customer"]})
    assert (
        found == Verdict.FAIL
        and message == "tool update_account is not allowed on server crm-server"
    )
    assert shown == ["update_account"]


CRM_ONLY = {
    "id": "mcp",
    "type": "mcp",
    "servers": ["crm-server"],
    "tools": {"crm-*": ["lookup_customer", "update_account"]},
}


def test_openllmetry_calls_are_checked_against_the_server_that_answered() -> None:
    """Both sides under OpenLLMetry, the server under its own service.name: the correct run
    passes the allow-list, the run calling a tool off it fails (it was reviewed, the server
    unknown)."""
    correct, export = mcp_runs("mcp-openllmetry-crm_server.otlp.json")
    (result,) = evaluate_pack(correct, pack(CRM_ONLY))
    assert result.verdict == Verdict.PASS, result.message
    (result,) = evaluate_pack(export, pack(CRM_ONLY))
    assert result.verdict == Verdict.FAIL
    assert result.message == "tool export_contacts is not allowed on server crm-server"
    assert names(export, result.evidence) == ["export_contacts"]


def test_a_server_naming_itself_otherwise_than_the_client_fails_with_both_names() -> None:
    """The agent's tool spans say crm-server; the process that answered is evil-mcp."""
    t = mcp_run("mcp-mcp_sdk-impostor.otlp.json")
    calls = [s for s in t.steps if s.is_tool_call]
    assert [(s.mcp or {}).get("server") for s in calls] == ["evil-mcp", "evil-mcp"]
    assert [(s.mcp or {}).get("claimed_server") for s in calls] == ["crm-server", "crm-server"]
    for rule in (CRM_ONLY, {"id": "mcp", "type": "mcp"}, {**CRM_ONLY, "servers": ["*"]}):
        (result,) = evaluate_pack(t, pack(rule))
        assert result.verdict == Verdict.FAIL
        assert result.message.startswith(
            "lookup_customer: the client named server crm-server, the server's own spans name"
            " it evil-mcp"
        )
        assert names(t, result.evidence) == ["lookup_customer", "update_account"]


def test_a_server_hiding_under_the_agents_name_does_not_borrow_the_clients_claim() -> None:
    """The impostor exporting under the agent's own service.name: its spans name no server
    apart, so the client's crm-server cannot be checked and is not taken on trust."""
    t = agent_run(named("mcp-mcp_sdk-impostor.otlp.json", "support-desk"))
    (result,) = evaluate_pack(t, pack(CRM_ONLY))
    assert (result.verdict, result.reason) == (Verdict.REVIEW, "mcp_server_unknown")


@pytest.mark.parametrize("body", ["client only", "server under the agent's name"])
def test_mcp_calls_to_an_unnamed_server_are_reviewed_not_passed(body: str) -> None:
    name = "mcp-openllmetry-crm_tools.otlp.json"
    t = agent_run(client_only(name) if body == "client only" else (MULTI / name).read_bytes())
    calls = [s for s in t.steps if s.is_tool_call]
    assert [(s.mcp or {}).get("server") for s in calls] == [None, None]
    rule = {"id": "mcp", "type": "mcp"}
    (result,) = evaluate_pack(t, pack({**rule, "servers": ["crm-server"]}))
    assert (result.verdict, result.reason) == (Verdict.REVIEW, "mcp_server_unknown")
    (result,) = evaluate_pack(
        t, pack({**rule, "servers": ["crm-server"], "unknown_server": "fail"})
    )
    assert result.verdict == Verdict.FAIL
    (result,) = evaluate_pack(t, pack({**rule, "tools": ["lookup_customer", "update_account"]}))
    assert result.verdict == Verdict.PASS  # tools alone need no server
    (result,) = evaluate_pack(t, pack({**rule, "tools": ["lookup_customer"]}))
    assert result.verdict == Verdict.FAIL and names(t, result.evidence) == ["update_account"]
    # A tool outside the list fails on any server, named or not, whatever `unknown_server` says.
    listed = {**rule, "servers": ["crm-server"], "tools": ["lookup_customer"]}
    (result,) = evaluate_pack(t, pack({**listed, "unknown_server": "allow"}))
    assert result.verdict == Verdict.FAIL and names(t, result.evidence) == ["update_account"]


@pytest.mark.parametrize(
    ("name", "housekeeping"),
    [
        ("mcp-mcp_sdk-crm_tools.otlp.json", ["MCP send initialize", "notifications/initialized"]),
        (
            "mcp-openllmetry-crm_tools.otlp.json",
            ["initialize.mcp", "ResponseStreamWriter", "tools/list.mcp"],
        ),
        ("mcp-mcp_sdk-impostor.otlp.json", ["MCP send initialize", "notifications/initialized"]),
        (
            "mcp-openllmetry-crm_server.otlp.json",
            ["initialize.mcp", "tools/list.mcp", "ResponseStreamWriter"] * 2,
        ),
    ],
)
def test_mcp_housekeeping_traces_are_no_agent_runs(name: str, housekeeping: list[str]) -> None:
    """`initialize`, `tools/list`, `notifications/initialized` and lone stream writers are the
    protocol's own chatter: only the traces of the agent (and the build-time `create_agent`,
    also no run) remain."""
    built = traces((MULTI / name).read_bytes())
    chatter = [t.root_name for t in built if not t.agent_run and t.agent_name is None]
    assert sorted(chatter) == sorted(housekeeping)
    assert all(t.agent_name == "support-agent" for t in built if t.agent_run)


def test_the_listed_tools_are_kept_with_the_server_that_listed_them() -> None:
    listing = [
        s.mcp
        for t in traces((MULTI / "mcp-openllmetry-crm_server.otlp.json").read_bytes())
        for s in t.steps
        if s.mcp and s.mcp["method"] == "tools/list"
    ]
    assert [(m["server"], m["tools"]) for m in listing] == [
        ("crm-server", ["export_contacts", "lookup_customer", "update_account"]),
        ("crm-server", ["lookup_customer", "update_account"]),  # the upgraded server
    ]
