"""The native rule interpreter gives the Python evaluators' results, field by field: on every
recorded capture (built by the Python builder, complete, incomplete and broken) under every
shipped and example pack, and on generated runs under generated packs."""

from __future__ import annotations

import json
import random
import subprocess
import sys
from dataclasses import replace
from datetime import date
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from collector.assembler.prices import PriceTable
from collector.config.sections import BUILTIN_RULES
from collector.evaluation import native_rules
from collector.evaluation.native_round import per_run
from collector.normalize import _native
from evaluators.model import Step, Trajectory
from evaluators.rulepack import RulePack, RulePackError, load_pack
from tests.support.every_core import on_every_core
from tests.support.native_rules import (
    PATTERNS,
    SECRETS,
    capture_files,
    capture_runs,
    differences,
    fuzz_share,
    round_tables,
    variants,
)
from tests.support.paths import TESTDATA

PACK_FILES = [
    *sorted(BUILTIN_RULES.glob("*.yaml")),
    *sorted((BUILTIN_RULES / "examples").glob("*.yaml")),
    *sorted((TESTDATA / "rules").glob("*.yaml")),
]
# Generated runs compared in all (seeded: the same ones each time), about 5 minutes on two cores.
FUZZ_RUNS = 1_000_000


def packs() -> list[RulePack]:
    out = []
    for path in PACK_FILES:
        try:
            out.append(load_pack(path).pack)
        except RulePackError:
            continue
    return out


@pytest.fixture(scope="module")
def captured() -> tuple[list[Trajectory], tuple[pa.Table, pa.Table]]:
    prices = PriceTable.load()
    runs = [v for p in capture_files() for t in capture_runs(p, prices) for v in variants(t)]
    return runs, round_tables(runs)


@pytest.mark.parametrize("pack", packs(), ids=lambda p: p.name)
def test_captures_get_the_python_results(
    pack: RulePack, captured: tuple[list[Trajectory], tuple[pa.Table, pa.Table]]
) -> None:
    runs, tables = captured
    found, deferred = differences(runs, pack, "captures", tables)
    assert found == []
    assert deferred == 0


def test_captures_cover_the_default_packs_native_rules(
    captured: tuple[list[Trajectory], tuple[pa.Table, pa.Table]],
) -> None:
    """The comparison above compares something: the default pack's loops and unrecovered
    errors fail on the captures that record them, natively too."""
    pack = load_pack(BUILTIN_RULES / "default.yaml").pack
    native = native_rules.compile_pack(pack)
    assert native.rule_ids == [
        "no-tool-loops",
        "errors-are-recovered",
        "budget-sanity",
        "no-secrets-in-tools",
    ]
    rows = native_rules.evaluate(native, *captured[1]).to_pylist()
    verdicts = {(r["rule_id"], r["verdict"], r["reason"]) for r in rows}
    assert ("no-tool-loops", "fail", "tool_loop") in verdicts
    assert ("errors-are-recovered", "review", "trace_incomplete") in verdicts
    assert ("budget-sanity", "review", "build_error") in verdicts
    assert ("no-secrets-in-tools", "pass", None) in verdicts
    assert len(rows) == 4 * sum(1 for t in captured[0] if t.agent_run)


# Run rule types the interpreter leaves to Python: a model's judgement, and the flow and
# retrieval rules.
PYTHON_RULE_TYPES = {"judge", "similarity", "evaluation", "flow", "retrieval"}


@pytest.mark.parametrize(
    "path", [p for p in PACK_FILES if p.parent != TESTDATA / "rules"], ids=lambda p: p.name
)
def test_the_shipped_packs_run_rules_are_all_evaluated_natively(path: Path) -> None:
    """Every rule of a shipped or example pack that a round evaluates run by run compiles
    without one refused (but the rule types left to Python), so a round under the shipped
    packs builds no trajectory in Python for them."""
    pack = load_pack(path).pack
    rules = [r for r in pack.rules if per_run(r) and r.type not in PYTHON_RULE_TYPES]
    native = native_rules.compile_pack(pack.model_copy(update={"rules": rules}), partial=False)
    assert native.rule_ids == [r.id for r in rules]


def test_captures_cover_the_support_packs_approval_boundaries(
    captured: tuple[list[Trajectory], tuple[pa.Table, pa.Table]],
) -> None:
    """The support-agent pack's precedes rules compared above reach every verdict on the
    captures that record approvals: an approved write, a write decided in the approval's own
    model turn, an approval for another customer, a write without an approval."""
    pack = load_pack(BUILTIN_RULES / "support-agent.yaml").pack
    native = native_rules.compile_pack(pack, partial=False)
    rows = native_rules.evaluate(native, *captured[1]).to_pylist()
    verdicts = {
        (r["verdict"], r["reason"])
        for r in rows
        if r["rule_id"] == "approval-before-account-change"
    }
    assert {
        ("pass", None),
        ("fail", "decided_before_approval"),
        ("fail", "wrong_authorization_context"),
        ("fail", "approval_boundary_violation"),
        ("review", "trace_incomplete"),
    } <= verdicts
    assert all(r["deferred"] is None for r in rows)


@pytest.mark.slow
@pytest.mark.timeout(1200)  # four to five minutes on two cores; a slower machine takes longer
def test_generated_runs_and_rules_get_the_python_results() -> None:
    """Generated packs and a million generated runs, on every core, a seed per process."""
    shares = on_every_core(fuzz_share, FUZZ_RUNS)
    assert sum(share.runs for share in shares) >= FUZZ_RUNS
    assert [f for share in shares for f in share.found] == []


def test_packs_together_and_scattered_steps_give_the_same_results(
    captured: tuple[list[Trajectory], tuple[pa.Table, pa.Table]],
) -> None:
    """Several packs over one reading of the round give each pack's results, run by run; and
    a run's steps need not be one stretch of the batch (each run's own order is kept)."""
    trajectories, steps = captured[1]
    natives = [native_rules.compile_pack(p) for p in packs()]
    one_by_one = [native_rules.evaluate(n, trajectories, steps).to_pylist() for n in natives]
    together = native_rules.evaluate_packs(natives, trajectories, steps).to_pylist()
    by_run: dict[str, list[dict]] = {}
    for rows in one_by_one:
        for row in rows:
            by_run.setdefault(row["trace_id"], []).append(row)
    assert together == [
        row for t in trajectories["trace_id"].to_pylist() for row in by_run.get(t, [])
    ]
    # every run's first step first, then every run's second step, ...
    place = pa.array(
        [i - start for start, n in step_starts(steps) for i in range(start, start + n)]
    )
    scattered = steps.take(pc.sort_indices(pa.table({"p": place}), [("p", "ascending")]))
    assert scattered["trace_id"].to_pylist() != steps["trace_id"].to_pylist()
    assert native_rules.evaluate_packs(natives, trajectories, scattered).to_pylist() == together


def step_starts(steps: pa.Table) -> list[tuple[int, int]]:
    """(first row, row count) of each run's stretch of the steps table."""
    ids = steps["trace_id"].to_pylist()
    out: list[tuple[int, int]] = []
    for i, trace_id in enumerate(ids):
        if i == 0 or ids[i - 1] != trace_id:
            out.append((i, 0))
        out[-1] = (out[-1][0], out[-1][1] + 1)
    return out


# Secrets the shipped detector set is for, near misses, and what RE2 and the regex crate could
# read apart (vertical tabs, brackets, separators, case).
SECRET_TEXTS = [
    *SECRETS,
    "ghp_" + "a" * 36,
    "xoxb-123-456-abc",
    "AIza" + "b" * 35,
    "eyJhbGciOi.eyJzdWIiOi.abc",
    "-----BEGIN RSA PRIVATE KEY-----",
    "pypi-AgEIcHlwaS5vcmc" + "c" * 70,
    "SG." + "d" * 22 + "." + "e" * 43,
    "https://hooks.slack.com/services/T1/B2/c3",
    "sk_live_" + "f" * 24,
    "123456789:" + "g" * 35,
    "AC" + "h" * 32,
    "//registry.npmjs.org/:_authToken=npm_abc",
    "AccountKey=" + "i" * 88,
    "M" + "j" * 24 + ".abcdef." + "k" * 27,
    "glpat-" + "l" * 20,
    "aws_key = 'AKIAABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789'",
    "CONTRASENA=x",
    "bearer\x0b: abcdefghijklmnop",
    "://a:b]@",
    "://a[b:c]@",
]


def re2_set(patterns: list[str]) -> object:
    import re2

    from evaluators.regex import OPTIONS

    s = re2.Set.SearchSet(OPTIONS)
    for p in patterns:
        s.Add(p)
    s.Compile()
    return s


def test_the_shipped_secret_patterns_mean_in_rust_what_they_mean_in_re2() -> None:
    """The native secrets scan reads the detector set (every built-in detector, the maintained
    set's patterns, the shipped packs' own) as RE2 does: the same patterns match in the same
    ASCII texts, seeded mutations of real secrets included."""
    from evaluators import known_secrets
    from evaluators.secrets import DETECTORS, ascii_form

    patterns = [ascii_form(d) for d in DETECTORS.values()]
    patterns += known_secrets.prefilters()
    patterns += [
        p for pack in packs() for r in pack.rules for p in getattr(r, "patterns", {}).values()
    ]
    patterns += list(PATTERNS.values())
    re2s = re2_set(patterns)
    rng = random.Random(0)
    alphabet = "aZ09_-.:=@/[]{} \t\x0b\x0c\x1c\"'+!#&$"
    texts = [t for t in SECRET_TEXTS if t.isascii()]
    for _ in range(3000):
        text = list(rng.choice(texts))
        for _ in range(rng.randint(0, 3)):
            i = rng.randrange(len(text) + 1)
            text[i : i + rng.randint(0, 1)] = rng.choice(alphabet)
        texts.append("".join(text))
    for text in texts:
        want = sorted(re2s.Match(text) or [])
        assert _native.regex_set_matches(patterns, text) == want, text


def test_a_difference_names_trace_pack_rule_field_and_both_values(
    captured: tuple[list[Trajectory], tuple[pa.Table, pa.Table]],
) -> None:
    runs, _ = captured
    looping = next(t for t in runs if t.trace_id.startswith("b0aa4364"))
    renamed = replace(
        looping, steps=[replace(s, tool_name=f"{s.tool_name}-v2") for s in looping.steps]
    )
    pack = load_pack(BUILTIN_RULES / "default.yaml").pack
    found, _ = differences([renamed], pack, "renamed", round_tables([looping]))
    assert any(
        d.startswith(f"renamed trace {looping.trace_id} pack default rule no-tool-loops message:")
        and "python 'over budget: lookup_customer-v2 called" in d
        and "native 'over budget: lookup_customer called" in d
        for d in found
    ), found


def test_rules_not_read_natively_are_refused_with_the_reason() -> None:
    judges = load_pack(BUILTIN_RULES / "examples" / "support-judges.yaml").pack
    with pytest.raises(ValueError, match=r"helpful-answer.*judge rules"):
        native_rules.compile_pack(judges, partial=False)
    partial = native_rules.compile_pack(judges)
    assert partial.rule_ids == []
    assert dict(partial.refused)["helpful-answer"] == "judge rules are not evaluated natively"
    rag = load_pack(BUILTIN_RULES / "examples" / "rag.yaml").pack
    assert dict(native_rules.compile_pack(rag).refused)["policy-answers-are-grounded"] == (
        "when.input: regex: regexes are not matched natively"
    )


def pack_of(rule: dict, **extra: object) -> RulePack:
    return RulePack.model_validate(
        {"name": "p", "version": "1", "owner": "o", "rules": [rule], **extra}
    )


def test_values_python_alone_compares_are_refused() -> None:
    """A date (YAML reads one) or an integer past 64 bits compares in Python as no JSON value
    does: such rules stay with the Python evaluators."""
    for value in (date(2024, 1, 1), 1 << 70):
        rule = {
            "id": "r",
            "type": "tool_args",
            "reason": "x",
            "step": {"name": "book"},
            "args": {"$.when": {"equals": value}},
        }
        native = native_rules.compile_pack(pack_of(rule))
        assert native.rule_ids == []
        assert "python_only_value" in native.refused[0][1]


def test_approval_shapes_python_alone_compares_leave_precedes_rules_to_python() -> None:
    """An approval result shape whose values JSON does not carry (a date) refuses the rules
    that read approval statuses; the pack's other rules stay native."""
    precedes = {
        "id": "approved-first",
        "type": "precedes",
        "reason": "x",
        "before": {"kind": "approval"},
        "then": {"name": "update_*"},
    }
    absence = {"id": "no-delete", "type": "absence", "reason": "y", "step": {"name": "delete"}}
    pack = RulePack.model_validate(
        {
            "name": "p",
            "version": "1",
            "owner": "o",
            "rules": [precedes, absence],
            "approvals": {"results": [{"path": "$.until", "approved": [date(2024, 1, 1)]}]},
        }
    )
    native = native_rules.compile_pack(pack)
    assert native.rule_ids == ["no-delete"]
    assert native.refused[0][0] == "approved-first"
    assert "python_only_value" in native.refused[0][1]


def test_number_text_in_another_script_is_left_to_python(
    captured: tuple[list[Trajectory], tuple[pa.Table, pa.Table]],
) -> None:
    """Python's float() reads Arabic-Indic digits; the interpreter defers such a run's rule
    instead of guessing, and says why."""
    rule = {
        "id": "big-input",
        "type": "recovery",
        "reason": "x",
        "when": {"input": {"gt": 5}},
    }
    pack = pack_of(rule)
    run = replace(captured[0][0], input="١٢", trace_id="arabic")
    native = native_rules.compile_pack(pack)
    rows = native_rules.evaluate(native, *round_tables([run])).to_pylist()
    assert [(r["rule_id"], r["verdict"], r["deferred"]) for r in rows] == [
        ("big-input", None, "non-ASCII text as a number")
    ]


def test_steps_without_attributes_are_refused_with_the_column_named(
    captured: tuple[list[Trajectory], tuple[pa.Table, pa.Table]],
) -> None:
    trajectories, steps = captured[1]
    native = native_rules.compile_pack(load_pack(BUILTIN_RULES / "default.yaml").pack)
    with pytest.raises(ValueError, match='steps has no column "attributes"'):
        native_rules.evaluate(native, trajectories, steps.drop_columns(["attributes"]))


def step(seq: int, name: str, kind: str = "tool", **fields: object) -> Step:
    start = 1_767_225_600 * 10**9 + seq * 10**9  # 2026-01-01, a second apart
    values: dict = {
        "seq": seq,
        "span_id": f"{seq:016x}",
        "parent_span_id": None,
        "depth": 0,
        "kind": kind,
        "span_kind": kind,
        "name": name,
        "status": "ok",
        "start_time_unix_nano": start,
        "end_time_unix_nano": start + 10**8,
        "tool_name": name if kind == "tool" else None,
        **fields,
    }
    return Step(**values)


def run_of(trace_id: str, steps: list[Step], **fields: object) -> Trajectory:
    values: dict = {
        "trace_id": trace_id,
        "revision": 1,
        "status": "ok",
        "close_reason": "complete",
        "agent_run": True,
        "service_name": "support-desk",
        "agent_name": "support-agent",
        "service_version": "1.0",
        "steps": steps,
        **fields,
    }
    return Trajectory(**values)


def native_rows(pack: RulePack, runs: list[Trajectory]) -> list[tuple]:
    native = native_rules.compile_pack(pack)
    rows = native_rules.evaluate(native, *round_tables(runs)).to_pylist()
    return [
        (r["trace_id"], r["rule_id"], r["verdict"], r["reason"], r["message"], r["deferred"])
        for r in rows
    ]


def test_flow_rules_are_evaluated_natively_as_python_evaluates_them() -> None:
    """A credential a vault tool returned, sent on by an egress tool in other case and
    spacing, fails the data-flow pack's rule natively, with the evaluator's message and
    evidence; a booking of a flight the search did not return fails `expect: present`."""
    pack = load_pack(BUILTIN_RULES / "examples" / "data-flow.yaml").pack
    assert native_rules.compile_pack(pack).refused == []
    leaked = run_of(
        "leaked",
        [
            step(
                0, "get_secret", result='{"content": [{"type": "text", "text": "DB=Zx9vQ2mLp7Hk"}]}'
            ),
            step(1, "send_email", arguments={"to": "x@example.com", "body": "key zx9vq2mlp7hk"}),
            step(2, "search_flights", result='{"flights": [{"id": "FL-1234"}]}'),
            step(3, "hold_seat", arguments={"flight": "FL-9999"}),
        ],
    )
    assert native_rows(pack, [leaked]) == [
        ("leaked", "fetched-content-to-payments", "pass", None,
         "no value of the source reached 0 sink(s)", None),
        ("leaked", "credentials-stay-in", "fail", "secret_exfiltration",
         "a value of 12 characters from get_secret (seq 0) reached send_email (seq 1)", None),
        ("leaked", "booked-flight-was-offered", "fail", "unoffered_flight_held",
         "hold_seat (seq 3) got no value from the source", None),
    ]  # fmt: skip
    booked = run_of(
        "booked",
        [
            step(0, "search_flights", result='{"flights": [{"id": "FL-1234"}]}'),
            step(1, "hold_seat", arguments={"flight": "fl-1234"}),
        ],
    )
    assert native_rows(pack, [booked])[2] == (
        "booked", "booked-flight-was-offered", "pass", None,
        "every sink got a value from the source (1)", None,
    )  # fmt: skip
    found, deferred = differences([leaked, booked], pack, "flow", round_tables([leaked, booked]))
    assert (found, deferred) == ([], 0)


def test_flow_text_is_case_folded_as_python_folds_it() -> None:
    """`ß` folds to `ss` and `\u3000` is a space to Python: the interpreter compares the text
    as the evaluator does, beyond ASCII too."""
    pack = load_pack(BUILTIN_RULES / "examples" / "data-flow.yaml").pack
    run = run_of(
        "folded",
        [
            step(0, "get_secret", result="Straße-Zx9vQ2mLp7"),
            step(1, "send_email", arguments={"body": "\u3000STRASSE-zx9vq2mlp7"}),
        ],
    )
    assert ("folded", "credentials-stay-in", "fail", "secret_exfiltration",
            "a value of 18 characters from get_secret (seq 0) reached send_email (seq 1)",
            None) in native_rows(pack, [run])  # fmt: skip
    found, deferred = differences([run], pack, "folded", round_tables([run]))
    assert (found, deferred) == ([], 0)


def test_the_case_folding_table_is_this_pythons() -> None:
    """The interpreter's `str.casefold()` table is the one the Python running the evaluators
    makes (scripts/generate-casefold-table writes it)."""
    script = Path(__file__).resolve().parents[3] / "scripts" / "generate-casefold-table"
    done = subprocess.run([sys.executable, str(script), "--check"], check=False)
    assert done.returncode == 0, "run scripts/generate-casefold-table"


def retrieval(seq: int, documents: list[dict]) -> Step:
    attributes = {}
    for i, doc in enumerate(documents):
        for field, value in doc.items():
            attributes[f"retrieval.documents.{i}.document.{field}"] = value
    return step(seq, "kb_search", "retrieval", attributes_json=json.dumps(attributes))


def test_retrieval_rules_are_evaluated_natively_as_python_evaluates_them() -> None:
    """Documents a retrieval returned (OpenInference's flattened attributes): a stale one, one
    beyond the user's access and a review for one without a label, natively as in Python."""
    pack = load_pack(BUILTIN_RULES / "examples" / "rag.yaml").pack
    native = native_rules.compile_pack(pack)
    assert native.rule_ids == ["documents-are-current", "documents-the-user-may-see"]
    fresh = json.dumps({"updated": "2025-12-01", "access": "public"})
    stale = json.dumps({"updated": "2024-01-01T08:00:00+02:00", "access": "confidential"})
    docs = [
        {"id": "kb-1", "score": 0.9, "metadata": fresh},
        {"id": "kb-2", "score": 0.7, "metadata": stale},
        {"id": "kb-3", "metadata": {"updated": "2025-11-30"}},
    ]
    runs = [
        run_of("staff", [retrieval(0, docs), step(1, "answer", "llm")], user_id="staff-7"),
        run_of("lead", [retrieval(0, docs[:1] + docs[2:])], user_id="lead-1"),
    ]
    assert native_rows(pack, runs) == [
        ("staff", "documents-are-current", "fail", "stale_document",
         "1 document(s) older than 180d: kb-2", None),
        ("staff", "documents-the-user-may-see", "fail", "document_access_violation",
         "user staff-7 was given document(s) beyond their access: kb-2 (confidential)", None),
        ("lead", "documents-are-current", "pass", None,
         "2 document(s) from kb_search (seq 0)", None),
        ("lead", "documents-the-user-may-see", "review", "document_unknown",
         "1 document(s) without an access label", None),
    ]  # fmt: skip
    found, deferred = differences(runs, pack, "rag", round_tables(runs))
    assert (found, deferred) == ([], 0)


def test_numbers_of_a_python_literal_result_flow_as_python_reads_them() -> None:
    """A tool that returned `str()` of a dict: its numbers are values too, spelled as Python
    spells them; one JSON cannot hold (an int past 64 bits) leaves the run to Python."""
    rule = {
        "id": "numbers",
        "type": "flow",
        "reason": "x",
        "source": {"kind": "tool"},
        "sink": {"name": "sink"},
        "min_length": 3,
    }
    pack = pack_of(rule)
    sent = step(2, "sink", arguments={"x": "12.5 and 100000.0"})
    runs = [
        run_of("literal", [step(1, "src", result="{'a': 2.5, 'b': 1e5}"), sent]),
        run_of("big", [step(1, "src", result="{'a': 123456789012345678901234567}"), sent]),
    ]
    assert [row[2:] for row in native_rows(pack, runs)] == [
        ("fail", "x", "a value of 8 characters from src (seq 1) reached sink (seq 2)", None),
        (None, None, None, "a tool result only Python reads (a literal, deep JSON)"),
    ]
    assert differences(runs, pack, "literal", round_tables(runs)) == ([], 1)
