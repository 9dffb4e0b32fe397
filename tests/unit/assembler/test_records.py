"""A round's `trajectories`, `steps` and `results` tables: each value on its own trace's rows,
the store's schema, and what cannot be stored kept as text or stored as a build error."""

from __future__ import annotations

import gc
import hashlib
from datetime import datetime

import orjson
import pyarrow as pa

from collector.assembler import work
from collector.assembler.build import build_trajectory
from collector.assembler.prices import PriceTable
from collector.assembler.spans import SPAN_FIELDS
from collector.assembler.work import Built, Closing, build_batch
from collector.config.sections import BUILTIN_RULES
from collector.evaluation.packs import PackText
from collector.evaluation.results import trajectory_result_rows
from collector.evaluation.round import RoundEvaluator
from collector.normalize.wire import decode_request
from collector.store.tables import ARROW_SCHEMAS, rows_table
from evaluators.model import Trajectory
from tests.support.otlp import new_span_id, new_trace_id, trace_request

NOW = datetime(2026, 11, 29, 12, 0, 0)
INT64_MAX = 2**63 - 1
PACKS = tuple(
    PackText(p.stem, hashlib.sha256(p.read_bytes()).hexdigest(), p.read_text())
    for p in sorted(BUILTIN_RULES.glob("*.yaml"))
)


def run(children: list[dict]) -> tuple[str, list[dict]]:
    """An agent run of one root and `children` (span specs without ids)."""
    trace_id, root = new_trace_id(), new_span_id()
    spans = [
        {
            "trace_id": trace_id,
            "span_id": root,
            "name": "invoke_agent a",
            "attributes": {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "a"},
        },
        *(
            {"trace_id": trace_id, "span_id": new_span_id(), "parent_span_id": root, **c}
            for c in children
        ),
    ]
    return trace_id.hex(), spans


def chat(**usage: int) -> dict:
    attributes = {"gen_ai.operation.name": "chat", "gen_ai.request.model": "m"}
    return {
        "name": "chat m",
        "attributes": attributes | {f"gen_ai.usage.{k}": v for k, v in usage.items()},
    }


def tool(arguments: str) -> dict:
    return {
        "name": "execute_tool lookup",
        "attributes": {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": "lookup",
            "gen_ai.tool.call.arguments": arguments,
        },
    }


def built(
    runs: list[tuple[str, list[dict]]],
    evaluator: RoundEvaluator | None = None,
    tool_arguments: dict[str, str] | None = None,
) -> Built:
    """The runs as one round; `tool_arguments` (trace id -> text) replaces what the decoder
    stored for a run's tool calls, as an earlier version stored it."""
    specs = [span for _, spans in runs for span in spans]
    body = trace_request(specs).SerializeToString()
    table = decode_request("traces", "protobuf", body, 10_000).table
    table = table.append_column("received_at", pa.array([NOW] * table.num_rows, pa.timestamp("us")))
    if tool_arguments:
        rows = table.to_pylist()
        for row in rows:
            if row["trace_id"] in tool_arguments and row["step_kind"] == "tool":
                row["tool_arguments"] = tool_arguments[row["trace_id"]]
        table = pa.Table.from_pylist(rows, schema=table.schema)
    closing = [Closing(trace_id, "complete", 1) for trace_id, _ in runs]
    return build_batch(table.select([*SPAN_FIELDS, "received_at"]), closing, {}, NOW, evaluator)


def by_trace(table: pa.Table) -> dict[str, list[dict]]:
    rows: dict[str, list[dict]] = {}
    for row in table.to_pylist():
        rows.setdefault(row["trace_id"], []).append(row)
    return rows


def test_totals_past_their_column_are_kept_as_text_on_their_own_run_only() -> None:
    inputs = run([chat(input_tokens=INT64_MAX), chat(input_tokens=INT64_MAX)])
    outputs = run([chat(output_tokens=INT64_MAX), chat(output_tokens=2)])
    fine = run([chat(input_tokens=3, output_tokens=4)])
    stored = by_trace(built([inputs, fine, outputs]).tables["trajectories"])
    (row,) = stored[inputs[0]]
    assert row["input_tokens"] is None
    assert orjson.loads(row["unrepresentable"]) == {"input_tokens": str(2 * INT64_MAX)}
    (row,) = stored[outputs[0]]
    assert (row["input_tokens"], row["output_tokens"]) == (0, None)
    assert orjson.loads(row["unrepresentable"]) == {"output_tokens": str(INT64_MAX + 2)}
    (row,) = stored[fine[0]]
    assert (row["input_tokens"], row["output_tokens"], row["unrepresentable"]) == (3, 4, None)


def test_a_run_whose_steps_cannot_be_stored_is_a_build_error_with_nothing_of_its_steps() -> None:
    deep = '{"a":' * 300 + "{}" + "}" * 300
    good = run([chat(input_tokens=1), tool('{"city": "Paris"}'), chat()])
    bad = run([tool("{}")])
    result = built([good, bad], RoundEvaluator(PACKS), {bad[0]: deep})
    tables = result.tables
    for name, table in tables.items():
        assert table.schema == ARROW_SCHEMAS[name]
    trajectories = by_trace(tables["trajectories"])
    assert trajectories[good[0]][0]["build_error"] is None
    assert "Recursion limit reached" in trajectories[bad[0]][0]["build_error"]
    steps = by_trace(tables["steps"])
    assert set(steps) == {good[0]}
    assert sorted(s["kind"] for s in steps[good[0]]) == ["agent", "llm", "llm", "tool"]
    (call,) = [s for s in steps[good[0]] if s["kind"] == "tool"]
    assert orjson.loads(call["arguments"]) == {"city": "Paris"}
    results = by_trace(tables["results"])
    assert {r["reason"] for r in results[bad[0]]} == {"build_error"}
    assert all(r["reason"] != "build_error" for r in results[good[0]])
    assert trajectories[bad[0]][0]["verdict_reasons"] == ["build_error"]


def test_one_run_s_result_rows_are_the_rows_the_round_stores_for_it() -> None:
    """Judges, sessions and replays store a run's results from its rows; assembly builds the
    round's columns at once: both give the same rows."""
    runs = [run([chat(input_tokens=5), tool('{"k": 1}')]), run([tool("{}"), tool("{}")])]
    stored = by_trace(built(runs, RoundEvaluator(PACKS)).tables["results"])
    evaluator = RoundEvaluator(PACKS)
    for trace_id, spans in runs:
        body = trace_request(spans).SerializeToString()
        rows = decode_request("traces", "protobuf", body, 10_000).table.to_pylist()
        t = build_trajectory(trace_id, rows, PriceTable.load())
        own = trajectory_result_rows(t, evaluator.evaluate(t), evaluator.shas, NOW)
        assert len(own) > 1
        assert rows_table("results", own).to_pylist() == stored[trace_id]


def test_a_round_keeps_none_of_its_trajectories_alive_while_it_builds(monkeypatch) -> None:
    """Only the rows' values are kept: thousands of live trajectories (steps, parsed
    attributes) made the garbage collector cost a worker more than the rows did."""
    made: set[int] = set()  # ids: a slotted trajectory takes no weak reference
    alive: list[int] = []  # per trajectory built: how many built before it are still alive
    real = work.build_trajectory

    def tracked(*args, **kwargs):
        gc.collect()
        alive.append(
            sum(1 for o in gc.get_objects() if isinstance(o, Trajectory) and id(o) in made)
        )
        t = real(*args, **kwargs)
        made.add(id(t))
        return t

    monkeypatch.setattr(work, "build_trajectory", tracked)
    runs = [run([chat(input_tokens=5), tool('{"k": 1}')]) for _ in range(4)]
    result = built(runs, RoundEvaluator(PACKS))
    assert result.tables["steps"].num_rows == 12
    assert alive == [0, 1, 1, 1]  # the one before, until the next one replaces it
