"""`sextant show`: steps numbered as findings cite them, matchers and messages printed whole."""

from __future__ import annotations

from collector.cli.show import render
from evaluators.matchers import StepMatcher


def step(seq: int, kind: str, name: str, depth: int = 1, **extra: object) -> dict:
    return {"seq": seq, "span_id": f"s{seq}", "depth": depth, "kind": kind, "name": name,
            "status": "ok", "duration_ms": 1.0, "arguments": None, **extra}  # fmt: skip


def trajectory(message: str) -> dict:
    return {
        "trace_id": "ab" * 16, "revision": 1, "revisions": [1], "service_name": "s",
        "agent_name": "a", "service_version": "1", "status": "ok", "close_reason": "root_ended",
        "steps": 3, "tool_calls": 2, "llm_calls": 0, "input_tokens": 0, "output_tokens": 0,
        "cost_usd": None, "error_count": 0, "duration_ms": 3.0, "verdict": "fail",
        "steps_detail": [
            step(0, "agent", "a", depth=0),
            step(1, "tool", "lookup", arguments={"order": 42}),
            step(2, "tool", "issue_refund"),
        ],
        "results": [
            {"verdict": "fail", "pack": "refunds", "rule_id": "approval", "reason": "r",
             "evidence_span_ids": ["s2"], "message": message},
        ],
    }  # fmt: skip


def test_findings_cite_step_numbers_that_the_tree_shows() -> None:
    lines = render(trajectory("issue_refund ran without approval")).splitlines()
    finding = next(line for line in lines if line.startswith("fail"))
    assert "at steps #2" in finding
    (cited,) = [line for line in lines if " #2 " in line]
    assert cited.lstrip().startswith("tool     issue_refund")
    assert [line.split()[2] for line in lines if line.lstrip().startswith("tool")] == ["#1", "#2"]


def test_matchers_and_messages_are_printed_whole_and_readable() -> None:
    matcher = StepMatcher.model_validate(
        {"kind": "tool", "name": "issue_*", "args": {"$.amount": {"gt": 100}},
         "attributes": {"sextant.approval.status": "approved", "x" * 150: {"exists": True}}}
    )  # fmt: skip
    described = matcher.describe()
    assert described.startswith('step(kind: tool, name: issue_*, attributes: {"sextant.approval')
    assert '"$.amount": {"gt": 100.0}' in described and "x" * 150 in described
    assert "{'" not in described and "…" not in described
    message = f"issue_refund ran without a preceding {described}"
    assert message in render(trajectory(message))
