"""Every real capture builds its expected trajectory, and all instrumentations of the same run
give the same sequence of model and tool steps."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

import pytest

from collector.assembler.build import build_trajectory
from collector.assembler.prices import PriceTable
from collector.normalize.wire import decode_request
from evaluators.model import Trajectory
from tests.support.paths import TESTDATA

CAPTURES = TESTDATA / "otlp-captures"
FILES = sorted([*CAPTURES.glob("*.otlp.json"), *CAPTURES.glob("*.body.json")])
PRICES = PriceTable.load()


def stem(path: Path) -> str:
    return path.name.removesuffix(".otlp.json").removesuffix(".body.json")


def build(path: Path) -> tuple[Trajectory, dict]:
    expected = json.loads((CAPTURES / f"{stem(path)}.expected.json").read_text())
    rows = decode_request("traces", "json", path.read_bytes(), 1 << 20).table.to_pylist()
    return build_trajectory(expected["trace_id"], rows, PRICES), expected


@pytest.mark.parametrize("path", FILES, ids=stem)
def test_capture_builds_its_expected_trajectory(path: Path) -> None:
    t, expected = build(path)
    if expected.get("not_an_agent_run"):
        assert t.agent_run is False
        return
    assert t.agent_run is True
    assert t.status == "ok"
    assert t.agent_name == expected["agent"]
    assert t.input == expected["user_input"]
    assert t.final_output == expected["final_answer"]
    assert t.llm_calls == expected["llm_calls"]
    assert (t.input_tokens, t.output_tokens) == (
        expected["input_tokens"],
        expected["output_tokens"],
    )
    got = [(s.tool_name, s.arguments, s.status, s.agent_name) for s in t.steps if s.is_tool_call]
    want = [
        (c["name"], c["arguments"], c["status"], c.get("agent", expected["agent"]))
        for c in expected["tool_calls"]
    ]
    ordered = [
        w
        for w, c in zip(want, expected["tool_calls"], strict=True)
        if c.get("order_sensitive", True)
    ]
    assert [g for g in got if g in ordered] == ordered
    assert sorted(map(repr, got)) == sorted(map(repr, want))
    for step in t.steps:
        if step.is_tool_call and step.status == "ok":
            assert step.tool_call_id, f"{step.tool_name} has no call id"
            assert step.result
    assert t.cost_usd == pytest.approx(
        (expected["input_tokens"] * 0.40 + expected["output_tokens"] * 1.60) / 1e6
    )


def model_and_tool_sequence(t: Trajectory) -> list[tuple]:
    """Model and tool steps in order; calls of one model turn (parallel) as a sorted group."""
    sequence: list[tuple] = []
    group: list[tuple] = []
    for step in t.steps:
        if step.kind == "llm":
            sequence.extend(sorted(group))
            group = []
            sequence.append(("llm",))
        elif step.is_tool_call:
            group.append(
                ("tool", step.tool_name, json.dumps(step.arguments, sort_keys=True), step.status)
            )
    return sequence + sorted(group)


def test_all_instrumentations_of_a_run_give_the_same_steps() -> None:
    by_scenario: dict[str, dict[str, list]] = defaultdict(dict)
    for path in FILES:
        t, expected = build(path)
        if expected.get("not_an_agent_run"):
            continue
        framework, scenario = stem(path).split("-")[0:2], stem(path).rsplit("-", 1)[1]
        by_scenario[scenario]["-".join(framework)] = model_and_tool_sequence(t)
    assert set(by_scenario) == {
        *("booking_ok", "parallel_tools", "tool_error_retry", "handoff"),
        *("approved_write", "missing_approval", "denied_ignored", "consecutive_loop"),
        "missing_search",
        *("wrong_subject", "one_turn_approval"),
    }
    for scenario, sequences in by_scenario.items():
        reference = sequences.get("python_sdk-genai_semconv")
        assert reference, scenario
        for framework, sequence in sequences.items():
            assert sequence == reference, f"{scenario}: {framework} differs from the GenAI run"
