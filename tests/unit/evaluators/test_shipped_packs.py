"""The shipped packs on real captures of every instrumentation: each scenario gets the same
verdict per rule, with the same evidence step, whatever instrumented the agent, and a correct run
gets no failure and no review from any pack."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from collector.assembler.build import build_trajectory
from collector.assembler.prices import PriceTable
from collector.config.sections import BUILTIN_RULES
from collector.normalize.wire import decode_request
from evaluators.evaluate import evaluate_pack
from evaluators.model import Trajectory
from evaluators.rulepack import load_pack
from tests.support.paths import TESTDATA

CAPTURES = TESTDATA / "otlp-captures"
PACKS = [load_pack(p).pack for p in sorted(BUILTIN_RULES.glob("*.yaml"))]
PRICES = PriceTable.load()

# Model calls are named after their model, which differs by instrumentation: evidence names them so.
MODEL_CALL = "<model call>"

# scenario -> {pack/rule: (verdict, names of the evidence steps, in order)}; every rule not named
# here must pass (or not apply): a correct run is never failed or reviewed.
SCENARIOS: dict[str, dict[str, tuple[str, list[str]]]] = {
    "booking_ok": {},
    "handoff": {},
    "parallel_tools": {},
    "tool_error_retry": {},
    "approved_write": {},
    "missing_approval": {
        "support-agent/approval-before-account-change": ("fail", ["update_account"]),
    },
    "denied_ignored": {
        "support-agent/approval-before-account-change": ("fail", ["update_account"]),
    },
    "wrong_subject": {
        "support-agent/approval-before-account-change": (
            "fail",
            ["request_approval", "update_account"],
        ),
    },
    # the model call that asked for both between them
    "one_turn_approval": {
        "support-agent/approval-before-account-change": (
            "fail",
            ["request_approval", MODEL_CALL, "update_account"],
        ),
    },
    "consecutive_loop": {
        "default/no-tool-loops": ("fail", ["lookup_customer"] * 6),
    },
    "missing_search": {
        "research-agent/literature-search-required": ("fail", []),
        "research-agent/search-then-read": ("fail", ["fetch_abstract", MODEL_CALL]),
    },
}


# scenario -> the reason code of the support pack's approval rule
REASONS = {
    "missing_approval": "approval_boundary_violation",
    "denied_ignored": "approval_boundary_violation",
    "wrong_subject": "wrong_authorization_context",
    "one_turn_approval": "decided_before_approval",
}


def scenario_of(path: Path) -> str:
    return path.name.removesuffix(".otlp.json").rsplit("-", 1)[-1]


def captures() -> list[Path]:
    return sorted(p for p in CAPTURES.glob("*.otlp.json") if scenario_of(p) in SCENARIOS)


def trajectory(path: Path) -> Trajectory:
    expected = json.loads(path.with_name(path.name.replace(".otlp.", ".expected.")).read_text())
    rows = decode_request("traces", "json", path.read_bytes(), 1 << 20).table.to_pylist()
    return build_trajectory(expected["trace_id"], rows, PRICES)


@pytest.mark.parametrize("path", captures(), ids=lambda p: p.name.removesuffix(".otlp.json"))
def test_every_instrumentation_gets_the_scenarios_verdicts(path: Path) -> None:
    t = trajectory(path)
    names = {s.span_id: MODEL_CALL if s.kind == "llm" else s.name for s in t.steps}
    got = {}
    reasons = {}
    for pack in PACKS:
        for r in evaluate_pack(t, pack):
            if r.verdict.value in ("fail", "review"):
                got[f"{r.pack}/{r.rule_id}"] = (r.verdict.value, [names[e] for e in r.evidence])
                reasons[f"{r.pack}/{r.rule_id}"] = r.reason
    want = SCENARIOS[scenario_of(path)]
    if scenario_of(path) in REASONS:
        rule = "support-agent/approval-before-account-change"
        assert reasons[rule] == REASONS[scenario_of(path)]
    assert {rule: verdict for rule, (verdict, _) in got.items()} == {
        rule: verdict for rule, (verdict, _) in want.items()
    }
    for rule, (_, steps) in want.items():
        assert got[rule][1] == steps, rule


def test_every_scenario_is_captured_from_every_instrumentation() -> None:
    """The same runs recorded from each family, so no instrumentation goes untested."""
    families: dict[str, set[str]] = {}
    for path in captures():
        family = path.name.removesuffix(".otlp.json").rsplit("-", 1)[0]
        families.setdefault(scenario_of(path), set()).add(family)
    for scenario in ("approved_write", "missing_approval", "denied_ignored"):
        assert families.get(scenario, set()) >= {
            "python_sdk-genai_semconv",
            "node_sdk-genai_semconv",
            "langgraph-openinference",
            "langgraph-openllmetry",
            "openai_agents-openinference",
        }, scenario
    for scenario in ("wrong_subject", "one_turn_approval"):
        assert families.get(scenario, set()) >= {
            "python_sdk-genai_semconv",
            "node_sdk-genai_semconv",
            "langgraph-openinference",
            "langgraph-openllmetry",
            "openai_agents-openinference",
        }, scenario
