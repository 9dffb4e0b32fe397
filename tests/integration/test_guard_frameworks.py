"""The runtime guard asked by real agent frameworks, with no Sextant SDK: a LangGraph ToolNode
wrapper and an OpenAI Agents SDK tool input guardrail (tests/frameworks/guarded_agent.py), run
in the frameworks' own venv against a scripted model, exporting by OTLP/HTTP to the running
server. What the guard answered is what happened, and what the verdict says afterwards."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter

from tests.support.admin import firing, trajectory
from tests.support.agents import AgentScript, provider_for, trace_id_of
from tests.support.paths import ROOT
from tests.support.server import DECIDE_FAST, FAST, SHIPPED_PACKS, RunningServer, serve

TOKEN = "frameworks-test-token-0123"
FRAMEWORKS = ["langgraph", "openai-agents"]
RULE = "approval-before-account-change"
CALLS = ("tool", "approval", "state_change")  # the kinds of a tool call that ran
# The support-desk's 9.x versions are DISABLEd by one destructive run.
DISABLING_PACK = """
name: support-ops
version: "1"
owner: support-platform-oncall
selector: {service: support-desk, version: "9.*"}
rules:
  - id: never-drop-tables
    type: absence
    step: {kind: tool, name: "drop_*"}
    reason: destructive_tool
    on_fail: DISABLE
"""


@pytest.fixture(scope="module")
def frameworks_python() -> str:
    """The venv with the frameworks: given by scripts/test, else installed (cached) now."""
    given = os.environ.get("SEXTANT_FRAMEWORKS_PYTHON")
    if given:
        return given
    installed = subprocess.run(
        ["bash", str(ROOT / "scripts" / "install-frameworks")],
        capture_output=True,
        text=True,
        check=True,
        timeout=600,
    )
    return installed.stdout.strip()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    packs: dict[str, str | Path] = {
        "support-agent": SHIPPED_PACKS / "support-agent.yaml",
        "support-ops": DISABLING_PACK,
    }
    running = serve(
        tmp_path_factory.mktemp("frameworks"),
        packs,
        assembler=FAST,
        decisions=DECIDE_FAST,
        auth={"tokens": [TOKEN]},
    )
    try:
        yield running
    finally:
        running.stop()


def run_agent(
    python: str, server: RunningServer, framework: str, scenario: str, version: str
) -> dict[str, Any]:
    spec = {
        "framework": framework,
        "scenario": scenario,
        "service": "support-desk",
        "version": version,
        "otlp_url": server.http_url,
        "token": TOKEN,
    }
    script = ROOT / "tests" / "frameworks" / "guarded_agent.py"
    done = subprocess.run(
        [python, "-W", "ignore::DeprecationWarning", str(script), json.dumps(spec)],
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def steps(t: dict[str, Any]) -> list[tuple[str, str]]:
    return [(s["kind"], s["name"]) for s in t["steps_detail"]]


def told(run: dict[str, Any]) -> list[tuple[str, str, list[str]]]:
    return [(a["tool"], a["answer"], a["reasons"]) for a in run["answers"]]


def agrees(t: dict[str, Any], run: dict[str, Any]) -> None:
    """Every answer is a step of the run, and a refused tool is no tool call in it."""
    by_id = {s["span_id"]: s for s in t["steps_detail"]}
    for given in run["answers"]:
        step = by_id[given["span_id"]]
        assert (step["kind"], step["name"]) == ("policy", f"guard {given['tool']}")
        ran = any(kind in CALLS and name == given["tool"] for kind, name in steps(t))
        assert ran == (given["answer"] == "allow"), (given, steps(t))


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_an_unapproved_write_is_refused_before_it_runs(
    frameworks_python: str, server: RunningServer, framework: str
) -> None:
    run = run_agent(frameworks_python, server, framework, "unapproved", "8.0.0")
    assert told(run) == [
        ("lookup_customer", "allow", []),
        ("update_account", "deny", ["approval_boundary_violation"]),
    ]
    assert run["ran"] == ["lookup_customer"]
    t = trajectory(server, run["answers"][0]["trace_id"])
    agrees(t, run)
    # Nothing was written, so nothing fails afterwards: the guard kept the boundary.
    assert [r for r in t["results"] if r["verdict"] == "fail"] == []


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_an_approved_write_is_allowed_and_passes_afterwards(
    frameworks_python: str, server: RunningServer, framework: str
) -> None:
    run = run_agent(frameworks_python, server, framework, "approved", "8.1.0")
    assert told(run) == [
        ("lookup_customer", "allow", []),
        ("request_approval", "allow", []),
        ("update_account", "allow", []),
    ]
    assert run["ran"] == ["lookup_customer", "request_approval", "update_account"]
    t = trajectory(server, run["answers"][0]["trace_id"])
    agrees(t, run)
    found = next(r for r in t["results"] if r["rule_id"] == RULE)
    assert found["verdict"] == "pass"


@pytest.fixture(scope="module")
def disabled(server: RunningServer) -> str:
    """support-desk 9.0.0 DISABLEd by a run that dropped a table."""
    exporter = OTLPSpanExporter(
        endpoint=server.grpc_endpoint,
        insecure=True,
        headers=(("authorization", f"Bearer {TOKEN}"),),
    )
    provider = provider_for(exporter, service="support-desk", version="9.0.0")
    script = AgentScript(provider.get_tracer("support"))
    with script.agent("support-agent", "Clean up", "Done.") as root:
        script.chat([("drop_table", {"table": "customers"})])
        script.tool("drop_table", {"table": "customers"}, "dropped")
        script.chat()
    provider.shutdown()
    trajectory(server, trace_id_of(root))
    return firing(server, "DISABLE", service_version="9.0.0")["decision"]


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_a_disabled_target_is_refused_every_call(
    frameworks_python: str, server: RunningServer, disabled: str, framework: str
) -> None:
    run = run_agent(frameworks_python, server, framework, "lookup", "9.0.0")
    assert told(run) == [("lookup_customer", "deny", ["target_disabled"])]
    assert run["ran"] == []
    assert run["answers"][0]["decision"] == "DISABLE"
    t = trajectory(server, run["answers"][0]["trace_id"])
    agrees(t, run)
