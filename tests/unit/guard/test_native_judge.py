"""The guard's native judgement against the Python one (collector/guard/check.py, the
specification): every captured run cut before each of its tool calls, the call proposed,
under the shipped packs and each example pack, under every decision the guard acts on. The
two answers must be equal field by field, or the native side must leave the call to Python."""

from __future__ import annotations

import hashlib
import random
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import asdict
from pathlib import Path
from typing import Any

import orjson
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from collector.assembler.prices import PriceTable
from collector.evaluation.packs import PackText
from collector.guard.call import GuardRequest
from collector.guard.check import judge_call
from collector.guard.native_judge import NativeJudge
from collector.normalize.wire import decode_request
from collector.targets import Target
from evaluators.base import Decision
from tests.support.paths import ROOT as REPO
from tests.support.paths import TESTDATA
from tests.unit.guard.generated_runs import SLACK, generated_run

PRICES = PriceTable.load()
SUPPORT = "support-agent"
CAPTURES = sorted(
    p
    for folder in ("otlp-captures", "otlp-multi")
    for p in (TESTDATA / folder).glob("*.json")
    if not p.name.endswith(".expected.json")
)
SHIPPED = sorted((REPO / "rules").glob("*.yaml"))
EXAMPLES = sorted((REPO / "rules" / "examples").glob("*.yaml"))
PACK_SETS = [SHIPPED, *([SHIPPED[0], example] for example in EXAMPLES)]
DECISIONS = [
    (Decision.PASS, []),
    (Decision.DOWNGRADE, ["tool_loop"]),
    (Decision.QUARANTINE, ["approval_boundary_violation"]),
    (Decision.DISABLE, []),
]


SCHEMA_PACK = """
name: schema
version: "1"
owner: shop-oncall
rules:
  - id: account-arguments
    type: tool_args
    step: {kind: tool, name: update_account}
    args:
      $.customer_id: {regex: "^C-[0-9]+$"}
    reason: bad_arguments
"""


def pack_text(path: Path) -> PackText:
    text = path.read_text()
    return PackText(path.stem, hashlib.sha256(text.encode()).hexdigest(), text)


def rows_of(path: Path) -> list[dict[str, Any]]:
    return decode_request("traces", "json", path.read_bytes(), 1 << 20).table.to_pylist()


def cuts(rows: list[dict[str, Any]]) -> list[tuple[list[dict[str, Any]], dict[str, Any]]]:
    """Each tool span of a run, and the run's spans that started before it (the run so far
    when the agent asked about that call)."""
    found = []
    for tool in rows:
        if tool["step_kind"] != "tool" or not tool["tool_name"]:
            continue
        run = [r for r in rows if r["trace_id"] == tool["trace_id"]]
        before = [r for r in run if r["end_time_unix_nano"] <= tool["start_time_unix_nano"]]
        if before:
            found.append((before, tool))
    return found


def proposal(tool: dict[str, Any], agent: str | None) -> GuardRequest:
    try:
        arguments = orjson.loads(tool["tool_arguments"] or "{}")
    except orjson.JSONDecodeError:
        arguments = {}
    return GuardRequest.model_validate(
        {
            "trace_id": tool["trace_id"],
            "parent_span_id": tool["parent_span_id"],
            "service": tool["service_name"] or "unknown",
            "agent": agent,
            "version": tool["service_version"],
            "tool": {
                "name": tool["tool_name"],
                "arguments": arguments if isinstance(arguments, dict) else {},
                "tool_call_id": tool["tool_call_id"],
            },
        }
    )


def test_every_captured_call_is_answered_natively_as_python_answers_it() -> None:
    judge = NativeJudge(PRICES, 64, 10_000)
    texts_of = {tuple(paths): tuple(pack_text(p) for p in paths) for paths in PACK_SETS}
    compared = deferred = 0
    for path in CAPTURES:
        for before, tool in cuts(rows_of(path)):
            # the run's own agent, none (the spans say), or the support agent the shipped
            # support pack selects (its approval rules then judge every call)
            agent = random.Random(tool["span_id"]).choice([tool["agent_name"], None, SUPPORT])
            request = proposal(tool, agent)
            own = [r for r in before if r["service_name"] == request.service]
            if not own:
                continue
            judge.adopt(request.trace_id, before, judge.runs.seq())
            for paths in PACK_SETS:
                packs, natives = judge.in_force(texts_of[tuple(paths)])
                if natives is None or judge.asks_sessions(request.service):
                    continue
                for decision in DECISIONS:
                    expected = judge_call(request, own, packs, decision, "c" * 16, 10**18, PRICES)
                    got = judge.answer(request, lambda _, d=decision: d, "c" * 16, 10**18)
                    if got is None:
                        deferred += 1
                        continue
                    compared += 1
                    where = f"{path.name}: {tool['tool_name']} ({tool['span_id']}), {paths}"
                    assert asdict(got) == asdict(expected), where
    # the comparison is not empty: most calls are answered natively
    print(f"{compared} answers compared, {deferred} left to Python")
    assert compared > 1_000 and deferred < compared, (compared, deferred)


# Generated runs (tests/unit/guard/generated_runs.py): the seed is fixed, so a failure names
# the run to make again alone, `generated_run(GENERATED_SEED, run)`.
GENERATED_SEED = 20_251_107
GENERATED_RUNS = 100
# Packs of guard settings the shipped ones leave at their defaults (on_unknown, quarantine,
# writes globs) and native rules they do not have (tight budgets, a forbidden step, argument
# conditions, payments and writes each behind an earlier step for the same subject).
GUARD_A = """
name: guard-a
version: "1"
owner: shop-oncall
selector: {service: "support-*"}
guard:
  writes: ["update_*", "Update_*", "drop_*", "send_?mail", "*_payment", "İ*"]
  on_unknown: allow
  quarantine: review
rules:
  - id: tight-budget
    type: budget
    max_tool_calls: 6
    max_same_tool: 3
    max_llm_calls: 5
    max_tokens: 6000
    max_cost_usd: 0.05
    max_duration_ms: 200
    reason: over_budget
    on_fail: REVIEW
  - id: no-drops
    type: absence
    step: {kind: tool, name: "drop_*"}
    reason: destructive_tool
    on_fail: FAIL
  - id: sane-update-arguments
    type: tool_args
    step: {kind: tool, name: "update_*"}
    args:
      $.customer_id: {exists: true, not_equals: ""}
      $.email: {exists: true}
    reason: bad_arguments
    on_fail: FAIL
  - id: payments-after-approval
    type: precedes
    before: {kind: approval}
    then: {kind: tool, name: ["send_payment", "transfer_*"]}
    require_approved: true
    reason: payment_without_approval
    on_fail: QUARANTINE
"""
GUARD_B = """
name: guard-b
version: "1"
owner: shop-oncall
selector: {agent: "support-agent"}
guard:
  on_unknown: deny
  quarantine: allow
rules:
  - id: lookup-before-write
    type: precedes
    before: {kind: tool, name: "lookup_*", status: ok}
    then: {kind: tool, name: "update_*"}
    same_subject:
      - {approval_argument: $.customer_id, action_argument: $.customer_id}
    reason: write_without_lookup
    on_fail: FAIL
"""


def inline_pack(name: str, text: str) -> PackText:
    """A pack given as text, as the packs in force are read."""
    return PackText(name, hashlib.sha256(text.encode()).hexdigest(), text)


def generated_pack_sets() -> list[tuple[PackText, ...]]:
    """The captures' pack sets, and sets without the default pack (whose secrets rule leaves
    to Python every run with non-ASCII text or a number that may be a card's) or with the
    packs above."""
    shipped = {p.stem: pack_text(p) for p in SHIPPED}
    guard_a, guard_b = inline_pack("guard-a", GUARD_A), inline_pack("guard-b", GUARD_B)
    return [
        *(tuple(pack_text(p) for p in paths) for paths in PACK_SETS),
        (shipped["research-agent"], shipped["support-agent"]),
        (shipped["default"], guard_a),
        (shipped["support-agent"], guard_a, guard_b),
        (guard_b,),
    ]


def generated_calls(
    seed: int, runs: int
) -> Iterator[tuple[int, list[dict[str, Any]], GuardRequest, int]]:
    """Each generated run cut before each of its tool calls, the call proposed as the agent
    might propose it: under the span it runs under, none or another of the run's, for the
    run's agent, none, another or one the packs select, at the time the call starts (or
    later, or at a clock far behind the run's). The run's index, the run so far, the call,
    and the time it is asked."""
    for run in range(runs):
        rows = generated_run(seed, run)
        agent = next(r["agent_name"] for r in rows if r["parent_span_id"] is None)
        for before, tool in cuts(rows):
            pick = random.Random(tool["span_id"])
            agents = [agent, agent, agent, None, SUPPORT, "paper-agent", "Support-Agent", ""]
            parents = [tool["parent_span_id"]] * 6 + [None] * 3 + [pick.choice(before)["span_id"]]
            asked = dict(tool, parent_span_id=pick.choice(parents))
            start = tool["start_time_unix_nano"]
            now = pick.choice([start] * 6 + [start + SLACK, 10**18])
            yield run, before, proposal(asked, pick.choice(agents)), now


def test_generated_calls_are_answered_natively_as_python_answers_them() -> None:
    """The captures are a few dozen well-behaved runs; generated ones reach what they do not
    (approvals granted, refused and unreadable, subjects equal only in Python's eyes, writes
    asked for in the approval's own turn or by no model call, loops, errors, sub-agents, broken
    trees, guard settings): each answer made natively must be Python's, field by field."""
    assert set(generated_run(GENERATED_SEED, 0)[0]) == set(rows_of(CAPTURES[0])[0])
    judge = NativeJudge(PRICES, 64, 10_000)
    pack_sets = generated_pack_sets()
    compared = deferred = 0
    answers: Counter[str] = Counter()
    reasons: Counter[str] = Counter()
    began = time.perf_counter()
    for run, before, request, now in generated_calls(GENERATED_SEED, GENERATED_RUNS):
        own = [r for r in before if r["service_name"] == request.service]
        if not own:
            continue
        judge.adopt(request.trace_id, before, judge.runs.seq())
        for texts in pack_sets:
            packs, natives = judge.in_force(texts)
            if natives is None or judge.asks_sessions(request.service):
                continue
            for decision in DECISIONS:
                got = judge.answer(request, lambda _, d=decision: d, "c" * 16, now)
                if got is None:
                    deferred += 1
                    continue
                expected = judge_call(request, own, packs, decision, "c" * 16, now, PRICES)
                compared += 1
                answers[got.answer.value] += 1
                reasons.update(got.reasons)
                where = (
                    f"seed {GENERATED_SEED}, run {run}: {request.tool.name!r} proposed at {now}"
                    f" ({request.model_dump_json()}), packs {[t.name for t in texts]},"
                    f" {decision[0].value}"
                )
                assert asdict(got) == asdict(expected), where
    seconds = time.perf_counter() - began
    print(f"{compared} answers compared, {deferred} left to Python in {seconds:.1f} s: {answers}")
    print(f"reasons: {dict(reasons.most_common())}")
    # not vacuous: most answers are made natively, and they allow, review and deny for the
    # rules' reasons, not the decisions' alone
    assert compared > 3_000 and deferred < compared, (compared, deferred)
    assert min(answers[a] for a in ("allow", "review", "deny")) > 300, answers
    rules = ("approval_boundary_violation", "tool_outside_allow_list", "write_without_lookup")
    assert all(reasons[r] > 20 for r in rules), reasons


def test_the_decision_is_asked_for_the_target_the_run_names() -> None:
    """Without an agent in the request, the target is the one the run's spans name."""
    judge = NativeJudge(PRICES, 8, 10_000)
    path = next(p for p in CAPTURES if "approved_write" in p.name)
    before, tool = next(
        (b, t) for b, t in cuts(rows_of(path)) if t["tool_name"].startswith("update")
    )
    request = proposal(tool, None)
    judge.adopt(request.trace_id, before, judge.runs.seq())
    _, natives = judge.in_force([pack_text(p) for p in SHIPPED])
    assert natives is not None
    asked: list[Target] = []

    def decision_of(target: Target) -> tuple[Decision, list[str]]:
        asked.append(target)
        return Decision.DISABLE, []

    got = judge.answer(request, decision_of, "c" * 16, 1)
    assert got is not None and got.reasons[0] == "target_disabled"
    agent = next(r["agent_name"] for r in before if r["agent_name"])
    assert asked == [Target(request.service, agent, request.version or "")]


def test_a_run_not_kept_or_a_pack_not_native_is_left_to_python() -> None:
    judge = NativeJudge(PRICES, 8, 10_000)
    path = CAPTURES[0]
    before, tool = cuts(rows_of(path))[0]
    request = proposal(tool, tool["agent_name"])
    texts = [pack_text(p) for p in SHIPPED]
    _, natives = judge.in_force(texts)
    assert natives is not None
    pass_ = (Decision.PASS, [])
    assert judge.answer(request, lambda _: pass_, "c" * 16, 1) is None
    judge.adopt(request.trace_id, before, judge.runs.seq())
    assert judge.answer(request, lambda _: pass_, "c" * 16, 1) is not None
    schema = PackText("schema", "0" * 64, SCHEMA_PACK)  # regexes are Python's alone
    assert judge.in_force([*texts, schema])[1] is None
    judge.runs.forget(request.trace_id)
    assert judge.answer(request, lambda _: pass_, "c" * 16, 1) is None


@pytest.mark.parametrize("most", [1, 3])
def test_runs_kept_are_bounded_and_the_least_recently_asked_let_go(most: int) -> None:
    judge = NativeJudge(PRICES, most, 10_000)
    runs = {}
    for path in CAPTURES[:4]:
        before, tool = cuts(rows_of(path))[0]
        runs[tool["trace_id"]] = before
        judge.adopt(tool["trace_id"], before, judge.runs.seq())
    kept = [t for t in runs if judge.runs.count(t) is not None]
    assert kept == list(runs)[-most:]


def test_a_run_adopted_from_rows_read_takes_the_spans_acknowledged_meanwhile() -> None:
    """A guard thread reads a run while ingest acknowledges more of its spans: the run is kept
    with those too, or not at all once the batches since are no longer remembered."""
    path = next(p for p in CAPTURES if "approved_write" in p.name)
    table = decode_request("traces", "json", path.read_bytes(), 1 << 20).table
    trace_id = table["trace_id"][0].as_py()
    table = table.filter(pc.equal(table["trace_id"], trace_id))
    rows = table.to_pylist()
    judge = NativeJudge(PRICES, 8, 10_000)
    since = judge.runs.begin_read()
    judge.acknowledged(table.slice(len(rows) - 1))  # acknowledged while the rest was read
    judge.adopt(trace_id, rows[:-1], since)
    judge.runs.end_read(since)
    assert judge.runs.count(trace_id) == len(rows)
    judge.acknowledged(table.slice(0, 1))  # a span sent again is kept once
    assert judge.runs.count(trace_id) == len(rows)

    # a read that began before batches no longer remembered keeps nothing
    judge.runs.forget(trace_id)
    since = judge.runs.begin_read()
    other = table.slice(0, 1).set_column(0, "trace_id", pa.array(["0" * 31 + "1"]))
    for _ in range(1_100):
        judge.acknowledged(other)
    judge.adopt(trace_id, rows[:-1], since)
    judge.runs.end_read(since)
    assert judge.runs.count(trace_id) is None
    # nor does one whose `since` is stale: batches acknowledged with no read begun
    judge.acknowledged(other)
    judge.adopt(trace_id, rows[:-1], since)
    assert judge.runs.count(trace_id) is None
    judge.adopt(trace_id, rows, judge.runs.seq())  # nothing acknowledged since: kept
    assert judge.runs.count(trace_id) == len(rows)


def test_a_run_past_its_spans_bound_is_not_kept() -> None:
    """The assembler closes a trace past `assembler.max_spans_per_trace` early: a run past it
    is left to Python (read from the store, as that trace is)."""
    path = next(p for p in CAPTURES if "approved_write" in p.name)
    table = decode_request("traces", "json", path.read_bytes(), 1 << 20).table
    trace_id = table["trace_id"][0].as_py()
    table = table.filter(pc.equal(table["trace_id"], trace_id))
    rows = table.to_pylist()
    judge = NativeJudge(PRICES, 8, len(rows) - 1)
    judge.adopt(trace_id, rows, judge.runs.seq())
    assert not judge.kept(trace_id)
    judge.adopt(trace_id, rows[:-1], judge.runs.seq())
    assert judge.kept(trace_id)
    judge.acknowledged(table.slice(len(rows) - 1))
    assert not judge.kept(trace_id)
