"""A round built and evaluated natively (`assembler.native`) stores exactly the rows the Python
path stores: the `trajectories`, `steps` and `results` tables column by column, the traces it
closed, its build errors, and what the evaluator tallied for the metrics, on every recorded
capture under the shipped and example packs. Input the native path does not take falls back to
the Python path, and says why."""

from __future__ import annotations

import hashlib
from dataclasses import asdict
from datetime import datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from collector.assembler import native_work
from collector.assembler.native_build import build_round
from collector.assembler.native_work import assemble_batch
from collector.assembler.spans import SPAN_FIELDS
from collector.assembler.work import Built, Closing, build_batch
from collector.evaluation import native_rules
from collector.evaluation.native_round import native_pack
from collector.evaluation.packs import PackText, load_text
from collector.evaluation.round import RoundEvaluator
from collector.normalize.wire import decode_request
from tests.support.native_build import table_differences
from tests.support.otlp import new_span_id, new_trace_id, trace_request
from tests.support.paths import TESTDATA

ROOT = Path(__file__).resolve().parents[3]
NOW = datetime(2026, 12, 1, 12, 0, 0)
CAPTURES = sorted(
    p
    for folder in ("otlp-captures", "otlp-multi", "otlp-repeats")
    for p in (TESTDATA / folder).glob("*.json")
    if not p.name.endswith(".expected.json")
)
# Every result of this pack is audited: the `audit` column is set natively as in Python.
AUDITED = """
name: audited
version: "1"
owner: quality
review:
  audit: {sample: 1.0, verdicts: [pass, fail]}
rules:
  - id: few-steps
    type: budget
    max_steps: 3
    reason: long_run
    on_fail: REVIEW
"""
# A sample of the runs audited, on one rule's passes: the marks follow the hash of each run.
SAMPLED = """
name: sampled
version: "2"
owner: quality
review:
  audit: {sample: 0.5, verdicts: [pass], rules: [few-tools]}
rules:
  - id: few-steps
    type: budget
    max_steps: 6
    reason: long_run
    on_fail: REVIEW
  - id: few-tools
    type: budget
    max_tool_calls: 1
    reason: many_tools
    on_fail: FAIL
"""


def pack_texts() -> tuple[PackText, ...]:
    texts = [p.read_text() for p in sorted((ROOT / "rules").rglob("*.yaml"))] + [AUDITED, SAMPLED]
    out = []
    for text in texts:
        name = load_text(text, "pack").pack.name
        out.append(PackText(name, hashlib.sha256(text.encode()).hexdigest(), text))
    return tuple(out)


PACKS = pack_texts()


def stored(path: Path) -> pa.Table:
    table = decode_request("traces", "json", path.read_bytes(), 1 << 20).table
    received = pa.array([NOW] * table.num_rows, pa.timestamp("us"))
    return table.append_column("received_at", received).select([*SPAN_FIELDS, "received_at"])


def closing_all(spans: pa.Table, reason: str, revision: int) -> list[Closing]:
    return [Closing(t, reason, revision) for t in dict.fromkeys(spans["trace_id"].to_pylist())]


def tally_of(built: Built) -> dict[str, Any]:
    assert isinstance(built.evaluator, RoundEvaluator)
    tally = asdict(built.evaluator.tally)
    del tally["seconds"]
    return tally


def order_of(built: Built) -> dict[str, Any]:
    """The order the tally's readers meet its keys in (metric series are made in that order,
    and the target cap takes targets in the order they first appear)."""
    assert isinstance(built.evaluator, RoundEvaluator)
    tally = built.evaluator.tally
    return {
        "outcomes": list(tally.outcomes),
        "verdicts": list(tally.verdicts),
        "applied": list(tally.applied),
        "targets": [(target, list(runs.verdicts)) for target, runs in tally.targets.items()],
    }


def differences(spans: pa.Table, closing: list[Closing], packs: tuple[PackText, ...]) -> list[str]:
    python = build_batch(spans, closing, {}, NOW, RoundEvaluator(packs))
    native = assemble_batch(spans, closing, {}, NOW, RoundEvaluator(packs), native=True)
    assert native.fallback is None, f"built in Python: {native.fallback}"
    assert native.native and not python.native
    out = []
    for name in ("trajectories", "steps", "results"):
        out += table_differences(name, python.tables[name], native.tables[name])
    for name in ("closed", "step_kinds", "build_errors"):
        want, got = getattr(python, name), getattr(native, name)
        if want != got:
            out.append(f"{name}: Python {want!r}, native {got!r}")
    if tally_of(python) != tally_of(native):
        out.append(f"tally: Python {tally_of(python)!r}\nnative {tally_of(native)!r}")
    elif order_of(python) != order_of(native):
        out.append(f"tally order: Python {order_of(python)!r}\nnative {order_of(native)!r}")
    return out


@pytest.mark.parametrize("path", CAPTURES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_capture_stores_the_same_rows_under_every_pack(path: Path) -> None:
    spans = stored(path)
    for reason, revision in (("complete", 1), ("incomplete_timeout", 2)):
        found = differences(spans, closing_all(spans, reason, revision), PACKS)
        assert not found, "\n".join(found[:20])


def test_a_round_results_are_evaluated_at_all() -> None:
    """The comparison is not of two empty tables: the captures give results, some audited."""
    spans = pa.concat_tables([stored(p) for p in CAPTURES])
    native = assemble_batch(
        spans, closing_all(spans, "complete", 1), {}, NOW, RoundEvaluator(PACKS), native=True
    )
    results = native.tables["results"]
    assert native.fallback is None
    assert results.num_rows > 50
    assert set(results["pack"].to_pylist()) >= {"default", "audited", "sampled"}
    audited = {
        (pack, rule, verdict)
        for pack, rule, verdict, audit in zip(
            *(results[c].to_pylist() for c in ("pack", "rule_id", "verdict", "audit")), strict=True
        )
        if audit
    }
    assert ("sampled", "few-tools", "pass") in audited
    assert {(p, r) for p, r, _ in audited} <= {("audited", "few-steps"), ("sampled", "few-tools")}
    sampled = [
        audit
        for pack, rule, verdict, audit in zip(
            *(results[c].to_pylist() for c in ("pack", "rule_id", "verdict", "audit")), strict=True
        )
        if (pack, rule, verdict) == ("sampled", "few-tools", "pass")
    ]
    assert None in sampled  # a sample, not every run
    assert set(native.tables["trajectories"]["verdict"].to_pylist()) >= {"pass", "fail"}


def test_disabled_rules_and_no_packs_match_python() -> None:
    spans = pa.concat_tables([stored(p) for p in CAPTURES])
    closing = closing_all(spans, "complete", 1)
    disabled = tuple(
        PackText(p.name, p.sha256, p.text, frozenset({"few-steps", "no-secrets-in-tools"}))
        for p in PACKS
    )
    for packs in (disabled, ()):
        found = differences(spans, closing, packs)
        assert not found, "\n".join(found[:20])


def test_a_retry_naming_failed_traces_is_built_in_python() -> None:
    spans = stored(CAPTURES[0])
    closing = closing_all(spans, "complete", 1)
    failed = {closing[0].trace_id: "ValueError: too deep"}
    built = assemble_batch(
        spans, closing, {}, NOW, RoundEvaluator(PACKS), failed=failed, native=True
    )
    assert built.fallback == "retry"
    assert built.build_errors == [f"{closing[0].trace_id}: ValueError: too deep"]


def test_without_the_flag_the_batch_is_built_in_python() -> None:
    spans = stored(CAPTURES[0])
    built = assemble_batch(spans, closing_all(spans, "complete", 1), {}, NOW, None)
    assert built.fallback is None
    assert built.tables["trajectories"].num_rows == len(closing_all(spans, "complete", 1))


class PanicException(BaseException):
    """What pyo3 raises for a panic of the native code: no `Exception`, like KeyboardInterrupt."""


def test_a_panic_in_the_native_code_builds_the_batch_in_python(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The native path runs in the collector's threads: a panic there must not escape into the
    assembler's round (and stop its thread), but be built in Python as any native error is."""

    def panics(*args: Any) -> Any:
        raise PanicException("index out of bounds")

    def interrupted(*args: Any) -> Any:
        raise KeyboardInterrupt

    monkeypatch.setattr(native_work, "build_round", panics)
    spans = stored(CAPTURES[0])
    closing = closing_all(spans, "complete", 1)
    built = assemble_batch(spans, closing, {}, NOW, RoundEvaluator(PACKS), native=True)
    assert built.fallback == "error"
    python = build_batch(spans, closing, {}, NOW, RoundEvaluator(PACKS))
    assert built.tables["trajectories"] == python.tables["trajectories"]
    monkeypatch.setattr(native_work, "build_round", interrupted)
    with pytest.raises(KeyboardInterrupt):  # what is no error of the native code goes on up
        assemble_batch(spans, closing, {}, NOW, RoundEvaluator(PACKS), native=True)


def guarded_run() -> pa.Table:
    """A support run whose account write the runtime guard refused inside the tool's span (as
    frameworks ask it): the tool did not run, and Python builds that step as a `guardrail`."""
    trace_id, root, tool, check = new_trace_id(), new_span_id(), new_span_id(), new_span_id()
    spans = [
        {
            "trace_id": trace_id,
            "span_id": root,
            "name": "invoke_agent support-agent",
            "attributes": {
                "gen_ai.operation.name": "invoke_agent",
                "gen_ai.agent.name": "support-agent",
            },
        },
        {
            "trace_id": trace_id,
            "span_id": tool,
            "parent_span_id": root,
            "name": "execute_tool update_account",
            "attributes": {
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": "update_account",
            },
        },
        {
            "trace_id": trace_id,
            "span_id": check,
            "parent_span_id": tool,
            "name": "guard update_account",
            "attributes": {
                "sextant.policy.name": "sextant.guard",
                "sextant.policy.decision": "deny",
                "sextant.guard.tool": "update_account",
            },
        },
    ]
    request = trace_request(spans, {"service.name": "support-desk"})
    table = decode_request("traces", "protobuf", request.SerializeToString(), 1 << 20).table
    received = pa.array([NOW] * table.num_rows, pa.timestamp("us"))
    return table.append_column("received_at", received).select([*SPAN_FIELDS, "received_at"])


def test_a_run_the_guard_refused_a_tool_in_stores_the_same_rows() -> None:
    """The refused tool is a `guardrail` step, so the support pack's approval rule does not
    fail the run for a write that never happened."""
    spans = guarded_run()
    closing = closing_all(spans, "complete", 1)
    python = build_batch(spans, closing, {}, NOW, RoundEvaluator(PACKS))
    native = assemble_batch(spans, closing, {}, NOW, RoundEvaluator(PACKS), native=True)
    assert "guardrail" in python.tables["steps"]["kind"].to_pylist()
    assert native.fallback is None  # built natively, guardrail step included
    for name in ("trajectories", "steps", "results"):
        found = table_differences(name, python.tables[name], native.tables[name])
        assert not found, "\n".join(found)


def tool_run(arguments: str) -> pa.Table:
    """An agent run with one tool call made with these arguments (JSON text)."""
    trace_id, root, tool = new_trace_id(), new_span_id(), new_span_id()
    spans = [
        {
            "trace_id": trace_id,
            "span_id": root,
            "name": "invoke_agent travel-agent",
            "attributes": {
                "gen_ai.operation.name": "invoke_agent",
                "gen_ai.agent.name": "travel-agent",
            },
        },
        {
            "trace_id": trace_id,
            "span_id": tool,
            "parent_span_id": root,
            "name": "execute_tool search_flights",
            "attributes": {
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": "search_flights",
                "gen_ai.tool.call.arguments": arguments,
            },
        },
    ]
    request = trace_request(spans, {"service.name": "travel-desk"})
    table = decode_request("traces", "protobuf", request.SerializeToString(), 1 << 20).table
    received = pa.array([NOW] * table.num_rows, pa.timestamp("us"))
    return table.append_column("received_at", received).select([*SPAN_FIELDS, "received_at"])


def test_results_the_interpreter_defers_are_merged_in_the_pack_order() -> None:
    """A possible secret, or text the detectors read with Unicode classes, is left by the
    interpreter to the Python detectors for that run: their result takes the rule's place among
    the pack's native results, and the run's verdict, the tally and the rows follow from it."""
    spans = pa.concat_tables(
        [
            tool_run('{"city": "Zürich"}'),
            tool_run('{"key": "sk-proj-' + "Ab3xK9mQ2vL7pR4tY8wZ1nC6" * 2 + '"}'),
            tool_run('{"city": "Paris"}'),
        ]
    )
    closing = closing_all(spans, "complete", 1)
    tables, _ = build_round(spans, closing, {}, NOW, attributes=True)
    steps = tables["steps"].append_column("attributes", tables["attributes"]["attributes"])
    default = native_pack(next(p for p in PACKS if p.name == "default"))
    rows = native_rules.evaluate_packs([default.native], tables["trajectories"], steps)
    deferred = rows.filter(rows["deferred"].is_valid())
    assert deferred["rule_id"].to_pylist() == ["no-secrets-in-tools"] * 2
    found = differences(spans, closing, PACKS)
    assert not found, "\n".join(found[:20])
    native = assemble_batch(spans, closing, {}, NOW, RoundEvaluator(PACKS), native=True)
    results = native.tables["results"].filter(pc.equal(native.tables["results"]["pack"], "default"))
    assert results["rule_id"].to_pylist() == [r.id for r in default.pack.rules] * 3
    verdicts = native.tables["trajectories"]["verdict"].to_pylist()
    assert verdicts[1] == "fail" and "fail" not in (verdicts[0], verdicts[2])


def test_a_trace_closed_twice_in_one_batch_is_built_in_python() -> None:
    """Results are matched to their run by trace id: a batch naming a trace twice is left to
    the Python path rather than given the wrong run's results."""
    spans = tool_run('{"city": "Paris"}')
    closing = closing_all(spans, "complete", 1) * 2
    built = assemble_batch(spans, closing, {}, NOW, RoundEvaluator(PACKS), native=True)
    python = build_batch(spans, closing, {}, NOW, RoundEvaluator(PACKS))
    assert built.fallback == "unsupported"
    assert built.tables["results"].num_rows == python.tables["results"].num_rows > 0
