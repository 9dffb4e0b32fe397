"""The native builder (collector/native/assemble/) makes exactly the `trajectories` and `steps`
tables the Python builder makes (`build_batch` without an evaluator): on every recorded capture,
on the odd and poisonous inputs the robustness tests use, and on seeded random rounds. What it
does not read as Python does, it refuses with `Unsupported` rather than build differently.

`scripts/fuzz-native-build --seed N --count M` runs random rounds from other seeds."""

from __future__ import annotations

import json
import os
from datetime import datetime
from pathlib import Path

import pyarrow as pa
import pytest

from collector.assembler.native_build import Unsupported, build_round
from collector.assembler.spans import SPAN_FIELDS
from collector.assembler.work import Closing, build_batch
from collector.normalize.wire import decode_request
from tests.support.every_core import on_every_core
from tests.support.native_build import differences, fuzz_share, table_differences
from tests.support.otlp import new_span_id, new_trace_id, trace_request
from tests.support.paths import TESTDATA

NOW = datetime(2026, 12, 1, 12, 0, 0)
CAPTURES = sorted(
    p
    for folder in ("otlp-captures", "otlp-multi", "otlp-repeats")
    for p in (TESTDATA / folder).glob("*.json")
    if not p.name.endswith(".expected.json")
)
# Generated trajectories compared in all (seeded: the same ones each time on as many cores),
# about 7 minutes on two cores; SEXTANT_NATIVE_BUILD_TRACES changes it (scripts/fuzz-native-build
# runs any seeds).
FUZZ_TRACES = int(os.environ.get("SEXTANT_NATIVE_BUILD_TRACES", "1000000"))


def stored(body: bytes, encoding: str = "protobuf") -> pa.Table:
    """A request's spans as the assembler reads them back: decoded, with when they arrived."""
    table = decode_request("traces", encoding, body, 1 << 20).table
    received = pa.array([NOW] * table.num_rows, pa.timestamp("us"))
    return table.append_column("received_at", received).select([*SPAN_FIELDS, "received_at"])


def closing_all(spans: pa.Table, reason: str = "complete", revision: int = 1) -> list[Closing]:
    return [Closing(t, reason, revision) for t in dict.fromkeys(spans["trace_id"].to_pylist())]


def assert_same(spans: pa.Table, closing: list[Closing], overrides: dict | None = None) -> None:
    found = differences(spans, closing, overrides or {}, NOW)
    assert not found, "\n".join(found[:20])


@pytest.mark.parametrize("path", CAPTURES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_capture_builds_the_same_tables(path: Path) -> None:
    spans = stored(path.read_bytes(), "json")
    for reason, revision in (("complete", 1), ("incomplete_timeout", 2)):
        assert_same(spans, closing_all(spans, reason, revision))


def agent_run(children: list[dict], flags: int = 0) -> pa.Table:
    """A root agent span and `children` (specs without ids), as the poison tests send them."""
    trace_id, root = new_trace_id(), new_span_id()
    spans = [
        {
            "trace_id": trace_id,
            "span_id": root,
            "name": "invoke_agent poison-agent",
            "attributes": {"gen_ai.operation.name": "invoke_agent"},
        },
        *(
            {"trace_id": trace_id, "span_id": new_span_id(), "parent_span_id": root, **c}
            for c in children
        ),
    ]
    request = trace_request(spans, {"service.name": "poison-svc"})
    request.resource_spans[0].scope_spans[0].spans[0].flags = flags
    return stored(request.SerializeToString())


def deep_json(levels: int) -> str:
    text = "{}"
    for _ in range(levels):
        text = '{"a":' + text + "}"
    return text


def with_column(spans: pa.Table, name: str, values: list) -> pa.Table:
    index = spans.schema.get_field_index(name)
    return spans.set_column(index, name, pa.array(values, spans.schema.field(name).type))


def test_poison_and_odd_spans_build_the_same_tables() -> None:
    """The inputs of test_build_robust.py and tests/integration/test_poison_spans.py."""
    int64_max = 2**63 - 1
    chat = {"gen_ai.operation.name": "chat", "gen_ai.usage.input_tokens": int64_max}
    deep_tool = {
        "name": "execute_tool lookup",
        "attributes": {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": "lookup",
            "gen_ai.tool.call.arguments": deep_json(300),
        },
    }
    odd_types = [
        {
            "name": "chat m",
            "attributes": {
                "gen_ai.operation.name": "chat",
                "gen_ai.output.messages": json.dumps(
                    [
                        {
                            "role": "assistant",
                            "parts": [
                                {"type": "tool_call", "id": 123, "name": "t", "arguments": {"x": 1}}
                            ],
                        }
                    ]
                ),
            },
        },
        {
            "name": "execute_tool t",
            "start": 1_700_000_000_100_000_000,
            "attributes": {
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": "t",
                "sextant.policy.decision": "deny",
                "sextant.policy.name": 42,
            },
        },
    ]
    server = {
        "name": "tools/call lookup_customer",
        "kind": 2,
        "attributes": {"mcp.method.name": "tools/call", "gen_ai.tool.name": "lookup_customer"},
    }
    rounds = [
        agent_run([deep_tool]),
        agent_run([{"name": "chat m", "attributes": chat}] * 2),
        agent_run([{"name": "execute_tool later", "start": 2**64 - 2, "end": 2**64 - 1}]),
        agent_run(odd_types),
        agent_run([server], flags=0x301),
    ]
    for spans in rounds:
        assert_same(spans, closing_all(spans))
    # spans stored by an earlier version: deep arguments kept as they were sent
    spans = rounds[0]
    tool = spans["step_kind"].to_pylist().index("tool")
    stored_deep = with_column(
        spans,
        "tool_arguments",
        [
            deep_json(300) if i == tool else v
            for i, v in enumerate(spans["tool_arguments"].to_pylist())
        ],
    )
    assert_same(stored_deep, closing_all(stored_deep))
    python = build_batch(stored_deep, closing_all(stored_deep), {}, NOW)
    assert python.build_errors  # the trace is a build error, and the same one natively


def cyclic(names: list[tuple[str, int | None]], attributes: dict) -> pa.Table:
    """Spans named `names`, each with the parent at the given index (None: a root)."""
    trace_id = new_trace_id()
    ids = [new_span_id() for _ in names]
    spans = [
        {
            "trace_id": trace_id,
            "span_id": ids[i],
            "parent_span_id": ids[p] if p is not None else b"",
            "name": name,
            "attributes": attributes,
        }
        for i, (name, p) in enumerate(names)
    ]
    return stored(trace_request(spans).SerializeToString())


def test_parent_cycles_build_the_same_tables() -> None:
    agent = {"gen_ai.operation.name": "invoke_agent"}
    for spans in (
        cyclic([("a", 1), ("b", 0), ("self", 2)], {}),
        cyclic([("a", 1), ("b", 0), ("invoke_agent named", None)], agent),
    ):
        assert_same(spans, closing_all(spans))


def test_a_round_without_spans_or_with_deleted_traces_builds_nothing() -> None:
    spans = cyclic([("a", None)], {})
    empty = spans.slice(0, 0)
    tables, errors = build_round(empty, [Closing("0" * 32, "complete", 1)], {}, NOW)
    assert (tables["trajectories"].num_rows, tables["steps"].num_rows, errors) == (0, 0, [])
    assert_same(spans, [Closing("0" * 32, "complete", 1), *closing_all(spans)])


@pytest.mark.slow
@pytest.mark.timeout(1500)  # about 7 minutes on two cores; a slower machine takes longer
def test_generated_rounds_build_the_same_tables() -> None:
    """A million trajectories (unless SEXTANT_NATIVE_BUILD_TRACES says otherwise) in seeded
    random rounds on every core, seed by seed from 0. The only refusal allowed is a tool result
    that looks like a Python literal of a form the native reader leaves to Python (random text
    opening with a bracket), and it stays rare."""
    shares = on_every_core(fuzz_share, FUZZ_TRACES)
    failures = [f for share in shares for f in share.failures]
    assert not failures, "\n".join(failures[:5])
    assert sum(share.traces for share in shares) >= FUZZ_TRACES
    assert sum(share.refused for share in shares) <= sum(share.rounds for share in shares) // 100


def test_a_difference_names_the_trace_table_row_column_and_values() -> None:
    python = pa.table({"trace_id": ["t1", "t2"], "name": ["a", "b"]})
    native = pa.table({"trace_id": ["t1", "t2"], "name": ["a", "c"]})
    assert table_differences("steps", python, native) == [
        "trace t2: steps row 1 column name: Python 'b', native 'c'"
    ]
    floats = pa.table({"trace_id": ["t"], "cost_usd": [0.0]})
    negative = pa.table({"trace_id": ["t"], "cost_usd": [-0.0]})
    assert table_differences("steps", floats, negative)


def one_tool(arguments: str | None = None, result: str | None = None, **attrs) -> pa.Table:
    tool = {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "request_approval",
        **attrs,
    }
    spans = agent_run([{"name": "execute_tool request_approval", "attributes": tool}])
    rows = spans.to_pylist()
    for row in rows:
        if row["step_kind"] == "tool":
            row["tool_arguments"] = arguments if arguments is not None else row["tool_arguments"]
            row["tool_result"] = result if result is not None else row["tool_result"]
    return pa.Table.from_pylist(rows, schema=spans.schema)


@pytest.mark.parametrize(
    ("spans", "why"),
    [
        (lambda: one_tool(arguments="{not json"), "tool arguments are not JSON"),
        (lambda: one_tool(result="{'approved': (True,)}"), "Python literal"),
        (lambda: one_tool(result="{'approved': True} # checked"), "Python literal"),
    ],
    ids=["arguments-not-json", "result-tuple", "result-comment"],
)
def test_what_the_native_builder_does_not_read_is_refused(spans, why: str) -> None:
    """Refused, never built differently: the Python builder reads these (as a build error or
    a Python literal), the native one leaves the round to it."""
    table = spans()
    closing = closing_all(table)
    build_batch(table, closing, {}, NOW)  # the Python builder reads it
    with pytest.raises(Unsupported, match=why):
        build_round(table, closing, {}, NOW)


def test_a_span_stored_twice_with_other_attributes_gives_its_step_the_copy_python_takes() -> None:
    """The steps' `attributes` column (what approval overrides and attribute conditions are read
    from) is the attributes of the span copy the step was built from, as the Python builder
    takes it, not of whichever copy a join would find first."""
    table = one_tool(result="ok")
    rows = table.to_pylist()
    tool = next(r for r in rows if r["step_kind"] == "tool")
    overridden = {**json.loads(tool["attributes"]), "sextant.approval.status": "denied"}
    for copy in ({**tool, "attributes": json.dumps(overridden)}, {**tool, "attributes": None}):
        for twice in ([*rows, copy], [copy, *rows]):
            spans = pa.Table.from_pylist(twice, schema=table.schema)
            assert_same(spans, closing_all(spans))
    native, _ = build_round(spans, closing_all(spans), {}, NOW, attributes=True)
    assert native["attributes"].num_rows == native["steps"].num_rows == 2


def test_the_attributes_column_is_made_only_when_asked() -> None:
    table = one_tool(result="ok")
    tables, _ = build_round(table, closing_all(table), {}, NOW)
    assert set(tables) == {"trajectories", "steps"}


def test_approval_results_written_as_python_literals_read_as_python_reads_them() -> None:
    for result in (
        "{'approved': True}",
        "{'status': 'Denied', 'n': [1, 2.5, -3], 'x': None}",
        "[{'type': 'text', 'text': 'approved'}]",
        "{'approved': true}",
        "[APPROVED] by manager",
        "{'decision': 'deny',}",
    ):
        table = one_tool(result=result)
        assert_same(table, closing_all(table))
