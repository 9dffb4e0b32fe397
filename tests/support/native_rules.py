"""The native rule interpreter against the Python evaluators: the same runs as a round's
`trajectories` and `steps` tables, evaluated both ways, compared field by field; and generated
runs and rules (seeded) for the differential test and scripts/fuzz-native-rules."""

from __future__ import annotations

import dataclasses
import random
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson
import pyarrow as pa
from pydantic import ValidationError

from collector.assembler.build import build_trajectory
from collector.assembler.prices import PriceTable
from collector.assembler.records import RoundRows, step_json
from collector.evaluation import native_rules
from collector.normalize.wire import decode_request
from evaluators.evaluate import evaluate_pack
from evaluators.model import STEP_KINDS, Step, Trajectory
from evaluators.rulepack import RulePack
from tests.support.paths import TESTDATA
from tests.support.picking import QuickRandom, pick

AT = datetime(2026, 1, 1, tzinfo=UTC)
FIELDS = (
    "rule_type",
    "pack_version",
    "verdict",
    "score",
    "severity",
    "reason",
    "message",
    "evidence_span_ids",
    "requested_decision",
    "service_name",
    "agent_name",
    "service_version",
)


def capture_files() -> list[Path]:
    return sorted(TESTDATA.glob("otlp*/*.otlp.json")) + sorted((TESTDATA / "otlp").glob("*.json"))


def capture_runs(path: Path, prices: PriceTable) -> list[Trajectory]:
    """Every trace of a capture, built by the Python builder."""
    rows = decode_request("traces", "json", path.read_bytes(), 1 << 20).table.to_pylist()
    by_trace: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        by_trace.setdefault(row["trace_id"], []).append(row)
    return [build_trajectory(trace, spans, prices) for trace, spans in sorted(by_trace.items())]


def variants(t: Trajectory) -> list[Trajectory]:
    """The run, the same run incomplete, and a run whose spans could not be built."""
    return [
        t,
        replace(
            t,
            trace_id=t.trace_id + "-late",
            status="incomplete",
            incomplete_reasons=["incomplete_timeout", "missing_parent"],
        ),
        replace(t, trace_id=t.trace_id + "-broken", steps=[], incomplete_reasons=["build_error"]),
    ]


def round_tables(runs: list[Trajectory]) -> tuple[pa.Table, pa.Table]:
    """The runs as the round's `trajectories` and `steps` tables (RoundRows'), the steps with
    the span attributes' JSON text beside them."""
    rows = RoundRows(AT, {})
    for t in runs:
        rows.add(t, (AT, AT), [], step_json(t.steps))
    tables = rows.tables()
    attributes = [s.attributes_json for t in runs for s in t.steps]
    steps = tables["steps"].append_column("attributes", pa.array(attributes, pa.string()))
    return tables["trajectories"], steps


def python_rows(runs: list[Trajectory], pack: RulePack, ids: set[str]) -> list[dict[str, Any]]:
    rows = []
    for t in runs:
        for r in evaluate_pack(t, pack):
            if r.rule_id not in ids:
                continue
            rows.append(
                {
                    "trace_id": t.trace_id,
                    "revision": t.revision,
                    "rule_id": r.rule_id,
                    "rule_type": r.rule_type,
                    "pack_version": r.pack_version,
                    "verdict": r.verdict.value,
                    "score": r.score,
                    "severity": r.severity.value,
                    "reason": r.reason or None,
                    "message": r.message,
                    "evidence_span_ids": list(r.evidence) or None,
                    "requested_decision": r.requested_decision.value
                    if r.requested_decision
                    else None,
                    "service_name": t.service_name,
                    "agent_name": t.agent_name,
                    "service_version": t.service_version,
                }
            )
    return rows


def differences(
    runs: list[Trajectory], pack: RulePack, label: str, tables: tuple[pa.Table, pa.Table]
) -> tuple[list[str], int]:
    """Where the interpreter and the evaluators disagree on the pack's native rules (trace,
    pack, rule, field, both values), and how many results the interpreter deferred."""
    native = native_rules.compile_pack(pack)
    ids = set(native.rule_ids)
    if not ids:
        return [], 0
    got = native_rules.evaluate(native, *tables).to_pylist()
    deferred = {(r["trace_id"], r["rule_id"]) for r in got if r["deferred"] is not None}
    got = [r for r in got if r["deferred"] is None]
    want = [
        r for r in python_rows(runs, pack, ids) if (r["trace_id"], r["rule_id"]) not in deferred
    ]
    out = []
    keys = [(r["trace_id"], r["rule_id"]) for r in want]
    if keys != [(r["trace_id"], r["rule_id"]) for r in got]:
        missing = sorted(set(keys) - {(r["trace_id"], r["rule_id"]) for r in got})
        extra = sorted({(r["trace_id"], r["rule_id"]) for r in got} - set(keys))
        out.append(
            f"{label} pack {pack.name}: results differ: python only {missing}, native only {extra}"
        )
        return out, len(deferred)
    for w, g in zip(want, got, strict=True):
        for field in FIELDS:
            if w[field] != g[field] or type(w[field]) is not type(g[field]):
                out.append(
                    f"{label} trace {w['trace_id']} pack {pack.name} rule {w['rule_id']}"
                    f" {field}: python {w[field]!r} native {g[field]!r}"
                )
    return out, len(deferred)


# Generated runs: few names, so loops, repeats and matches happen; values that Python and Rust
# could read differently (Unicode, deep JSON, huge and odd numbers, number-like text).
NAMES = ["search", "lookup_customer", "update_account", "request_approval", "fetch", "Ünïcødé_✓"]
AGENTS = [None, "support-agent", "paper-agent", "agent-ß"]
TEXTS = ["", "x", "hello", "1_000", " 12.5 ", "١٢", "inf", "NaN", "-0", "1e400", "ok\n", "é"]
# Secrets and near misses, for the secrets rules (the detectors confirm in Python).
SECRETS = [
    "sk-abcdefghijklmnopqrstuvwx",
    "AKIAABCDEFGHIJKLMNOP",
    "bob@example.com",
    "4111 1111 1111 1111",
    "4111 1111 1111 1112",
    '{"password": "Zx9vQ2mLp7Hk"}',
    "https://admin:Zx9vQ2mLp7@db.example.com/x",
    "max_tokens",
    "ACME-1234",
    "ref: 12",
    "a]@",
    "x\x0by",
    "ünï sk-abcdefghijklmnopqrstuvwx",
    "Bearer: abcdefghijklmnop",
]
KEYS = ["password", "db_password", "clientSecret", "payment_token", "accessToken", "x", "API_KEY"]
KEYS += ["pwd", "cwd", "secret.key", "my-secret", "9password", "TOKEN", "auth_token", "keyPass"]
SEPARATORS = [": ", "=", ":=", " => ", '": "', '\\": \\"', "='", ": `", ":= ", "\\n", " : "]
VALUES = ["Zx9vQ2mLp7Hk", "changeme", "${DB_PASS}", "/etc/secret", "aaaabbbb", "abcdefgh", "tok"]
VALUES += ["f47ac10b-58cc-4372-a567-0e02b2c3d479", "get_key()", "xxxxxxxx", "Zx9 vQ2mLp7", ""]
VALUES += [
    "$Zx9vQ2mLp7",
    "{Zx9vQ2mLp7}",
    "<your-key>",
    "12345678",
    "Zx9vQ2mLp7Hk\\n",
    'a\\"b9Qz7LmKp',
]


def gen_keyword_text(rng: random.Random) -> str:
    """Keyword assignments as tool arguments and results carry them: JSON, .env, code, JSON in
    JSON, of keys that name secrets and keys that do not, values that are credentials and not."""
    parts = []
    for _ in range(rng.randint(1, 3)):
        quote = rng.choice(["", '"', "'", "`", '\\"'])
        parts.append(
            rng.choice(["", "{", " ", "\\n", "x."])
            + rng.choice(KEYS)
            + rng.choice(SEPARATORS)
            + quote
            + rng.choice(VALUES)
            + quote
            + rng.choice(["", "}", ",", ";", " ", "\n"])
        )
    return "".join(parts)


PATTERNS = {"acme": r"ACME-\d{4}", "ref": r"\bref\s*:\s*\d+", "odd": r"[^a[\s]]+@", "vt": r"x\Sy"}


def gen_json(rng: random.Random, depth: int = 0) -> Any:
    roll = rng.random()
    if depth > 6 or roll < 0.35:
        return pick(
            rng,
            *(None, True, False, 0, 1, -1, 2020, 2019.5, 1.0, -0.0, 1e300),
            *((1 << 63) - 1, -(1 << 63), (1 << 64) - 1, 9007199254740993, 0.1),
            lambda: rng.randint(-5, 5),
            lambda: rng.choice(TEXTS),
            lambda: rng.choice(SECRETS),
            lambda: gen_keyword_text(rng),
        )
    if roll < 0.7:
        keys = ["customer_id", "year_from", "amount", "q", "nested", "ü"]
        return {rng.choice(keys): gen_json(rng, depth + 1) for _ in range(rng.randint(0, 4))}
    return [gen_json(rng, depth + 1) for _ in range(rng.randint(0, 3))]


# Approvals: overrides on the span, results of approval tools in every shape and envelope
# (Python literals too), subjects named in arguments and results.
OVERRIDES = ["approved", "Denied", "PENDING", "maybe", True, None, ["approved"], 1]
APPROVAL_RESULTS = [
    '{"approved": true}',
    '{"approved": false, "customer_id": "C-1"}',
    '{"status": " Denied "}',
    '{"status": "granted", "customer_id": "C-2"}',
    '{"decision": "approve", "customer_id": "C-1"}',
    "{'approved': True, 'customer_id': 'C-1'}",
    "{'grant': 1, 'customer_id': 1.0}",
    "{'approved': (1, 2)}",
    "pending",
    "Rejected",
    '{"grant": "YES ", "customer_id": "C-1"}',
    '{"grant": "later"}',
    '{"decision": "nope"}',
    '{"output": "{\\"approved\\": true, \\"customer_id\\": \\"C-2\\"}"}',
    '{"customer_id": {"id": [1, "C-\u00e9"]}}',
]
SUBJECTS = [
    {"customer_id": "C-1"},
    {"customer_id": "C-2"},
    {"customer_id": 1},
    {"customer_id": True},
    {"customer_id": 'it\'s "x"\n\u00e9'},
    {"customer_id": "C-\u2713"},
    {"customer_id": [1.5e-7, None, {"k": 10**17}]},
    {"nested": {"q": "C-1"}, "q": "C-1"},
]


def gen_attributes(rng: random.Random) -> str | None:
    if rng.random() < 0.25:
        return orjson.dumps({"sextant.approval.status": rng.choice(OVERRIDES)}).decode()
    return rng.choice([None, "", "{}", '{"sextant.approval.status": "approved"}', '{"a": 1}'])


# Values one step returns and a later one passes on (flow rules): tokens, words of longer text,
# numbers, case and whitespace changes, text Python case-folds beyond ASCII.
FLOW_VALUES: list[Any] = ["Zx9vQ2mLp7Hk", "FL-1234", "KEY=Sekrit123", "Paris CDG", "tok", "Ünï-Tok"]
FLOW_VALUES += [12345678, 1e16, 2.5, "12345678", "sk-abcdefghijklmnopqrstuvwx", "x\x1cy zzzzzz."]
FLOW_VALUES += ["Straße-Tok", "ΣΊΣΥΦΟΣ ς", "İstanbul", "ﬁle-token", "\u3000spaced\u3000out\u2028"]


def flow_value(rng: random.Random) -> Any:
    """A flow value, the first few most often (so that a later step passes one on)."""
    return rng.choice(FLOW_VALUES[:3] if rng.random() < 0.6 else FLOW_VALUES)


def gen_flow_result(rng: random.Random) -> str:
    """A tool result carrying flow values, in the envelopes tools put around them."""
    value = flow_value(rng)
    inner: Any = pick(
        rng,
        lambda: {"token": value, "items": [rng.choice(FLOW_VALUES)], "ok": True},
        lambda: f"your code is {value}. Use it!",
        lambda: [value, {"nested": {"q": rng.choice(FLOW_VALUES)}}],
        value,
    )
    text = inner if isinstance(inner, str) else orjson.dumps(inner).decode()
    return pick(
        rng,
        text,
        lambda: orjson.dumps(
            {"content": [{"type": "text", "text": text}], "isError": False}
        ).decode(),
        lambda: orjson.dumps({"output": inner}).decode(),
        lambda: f"{{'token': {value!r}}}",
        "{'token': (1, 2)}",
        lambda: f"  {text}  ",
    )


def gen_flow_args(rng: random.Random) -> Any:
    """Tool arguments that may carry a flow value on (changed in case and spacing)."""
    value = str(flow_value(rng))
    value = rng.choice([value, value.upper(), value.lower(), value.replace(" ", "  \t")])
    return pick(
        rng,
        lambda: {"to": "bob@example.com", "body": f"here: {value}"},
        lambda: {"code": value},
        lambda: [value[1:]],
        lambda: {"n": rng.choice(FLOW_VALUES)},
        value,
    )


DATES = [None, "2025-12-01", "2020-01-01T10:00:00Z", "2025-12-31T23:59:59.5+02:00", "yesterday"]
DATES += ["2025-06-01 08:00", "20240101", "2024-02-30", "0001-01-01", 5, "2025-12-31T22:00:00.123"]
DATES += ["2025-07-01T00:00:00,123456789-05:30", "2025-07-01T00:00:00.Z", "2025-07-01T25:00"]


def gen_document(rng: random.Random) -> dict[str, Any]:
    metadata: dict[str, Any] = {}
    for key, values in (
        ("updated", DATES),
        ("access", [None, "public", "internal", "confidential", 3, True, ["x"]]),
        ("score", [0.9, "0.7", "x", True]),
        ("relevance_score", [0.4, None]),
        ("id", ["m1", 2]),
    ):
        if rng.random() < 0.5:
            metadata[key] = rng.choice(values)
    doc: dict[str, Any] = {}
    if rng.random() < 0.7:
        doc["id"] = rng.choice([None, "d1", "", 7, "doc-ü", 1.5])
    if rng.random() < 0.6:
        doc["score"] = rng.choice([None, 0.9, 0.5, 0.6, "0.7", "x", True, 1, " 1_0 "])
    if rng.random() < 0.8:
        doc["metadata"] = rng.choice([metadata, orjson.dumps(metadata).decode(), "{bad"])
    if rng.random() < 0.3:
        doc[rng.choice(["content", "page_content", "text"])] = "policy text"
    return doc


def gen_retrieval_attributes(rng: random.Random) -> str:
    """A retrieval span's attributes in the shapes the instrumentations write."""
    docs = [gen_document(rng) for _ in range(rng.randint(0, 3))]
    attributes: dict[str, Any] = {}
    shape = rng.choice(["openinference", "genai", "genai_text", "openllmetry", "empty", "none"])
    if shape == "openinference":
        for i, doc in enumerate(docs):
            place = rng.choice([str(i), str(i), f"0{i}", f"{i + 10}"])
            for field, value in doc.items():
                key = f"retrieval.documents.{place}.document.{field}"
                attributes[key + rng.choice(["", "", "\n", "x"])] = value
        if rng.random() < 0.4:
            ids = [{"id": f"out{i}"} for i in range(rng.randint(0, 3))]
            attributes["output.value"] = orjson.dumps({"documents": ids}).decode()
    elif shape == "genai":
        attributes["gen_ai.retrieval.documents"] = [*docs, "not a document"]
    elif shape == "genai_text":
        attributes["gen_ai.retrieval.documents"] = orjson.dumps(docs).decode()
    elif shape == "openllmetry":
        key = rng.choice(["traceloop.entity.output", "gen_ai.task.output", "output.value"])
        out = {"documents": docs} if docs or rng.random() < 0.5 else []
        attributes[key] = orjson.dumps(out).decode()
    elif shape == "empty":
        attributes["retrieval.documents"] = []
    return orjson.dumps(attributes).decode()


def gen_step(rng: random.Random, seq: int, ids: list[str], base: int = 0) -> Step:
    kind = rng.choice([*STEP_KINDS, "tool", "tool", "llm", "approval"])
    span_kind = "tool" if rng.random() < 0.5 else kind
    name = rng.choice(NAMES)
    attributes = gen_attributes(rng)
    if kind == "retrieval" or rng.random() < 0.1:
        attributes = gen_retrieval_attributes(rng)
    span_id = f"{seq:016x}"
    ids.append(span_id)
    start = base + rng.randint(0, 10**12)
    return Step(
        seq=seq,
        span_id=span_id,
        parent_span_id=ids[0] if ids else None,
        depth=1,
        kind=kind,
        span_kind=span_kind,
        name=name,
        status=rng.choice(["ok", "ok", "error"]),
        start_time_unix_nano=start,
        end_time_unix_nano=start + rng.randint(0, 10**9),
        agent_name=rng.choice(AGENTS),
        tool_name=rng.choice([None, "", name, name, rng.choice(NAMES)]),
        tool_call_id=rng.choice([None, f"call_{seq}"]),
        arguments=pick(
            rng,
            *(None, lambda: gen_json(rng), lambda: {"q": "same"}, lambda: rng.choice(SUBJECTS)),
            *(lambda: gen_flow_args(rng), lambda: gen_flow_args(rng)),
        ),
        result=pick(
            rng,
            *(None, "", "done", lambda: rng.choice(SECRETS), '{"ok": true}'),
            *(lambda: gen_keyword_text(rng), lambda: gen_flow_result(rng)),
            lambda: gen_flow_result(rng),
            *(lambda: rng.choice(APPROVAL_RESULTS), lambda: rng.choice(APPROVAL_RESULTS)),
        ),
        approval_status=rng.choice([None, None, "approved", "denied", "pending"]),
        # the model call that asked for it: an earlier step, itself, or one not in the run
        requested_by=rng.choice([None, rng.choice(ids), rng.choice(ids), "ffffffffffffffff"]),
        model=rng.choice([None, "gpt"]),
        input_tokens=rng.choice([None, 0, rng.randint(0, 5000), (1 << 62)]),
        output_tokens=rng.choice([None, rng.randint(0, 5000)]),
        cost_usd=rng.choice([None, 0.0, rng.random(), 1e-7]),
        attributes_json=attributes,
        mcp=rng.choice(
            [
                None,
                None,
                {},
                {"server": "crm-server", "method": "tools/call"},
                {"server": "crm.internal:8080"},
                {"server": "other"},
                {"server": "crm-server", "claimed_server": "crm-server2"},
                {"server": ""},
                {"server": 5},
            ]
        ),
    )


def gen_run(rng: random.Random, n: int) -> Trajectory:
    ids: list[str] = []
    base = rng.choice([0, 1_767_225_600 * 10**9])  # 1970, or 2026 (documents' dates)
    steps = [gen_step(rng, i, ids, base) for i in range(rng.randint(0, n))]
    if steps and rng.random() < 0.3:  # a loop
        steps += [replace(steps[-1], seq=len(steps) + i, span_id=f"loop{i}") for i in range(6)]
    if rng.random() < 0.5:  # one after the other, within the clocks' slack of each other
        clock = base + rng.randint(0, 10**12)
        for step in steps:  # (each a step of this run alone, the loop's copies too)
            start = max(0, clock + rng.choice([-2, -1, 0, 0, 1, 2]) * 500_000)
            clock = start + rng.choice([0, 1_000_000, 10**8])
            step.start_time_unix_nano, step.end_time_unix_nano = start, clock
    status = rng.choice(["ok", "error", "incomplete"])
    start = rng.randint(0, 10**15)
    return Trajectory(
        trace_id=f"{rng.getrandbits(64):016x}",
        revision=rng.randint(1, 3),
        status=status,
        close_reason="complete",
        agent_run=rng.random() < 0.95,
        service_name=rng.choice([None, "support-desk", "svc"]),
        agent_name=rng.choice(AGENTS),
        service_version=rng.choice([None, "1.0", "2.0"]),
        steps=steps,
        root_span_id=rng.choice([None, "", *[ids[0] if ids else None] * 3]),
        input=rng.choice([None, *TEXTS, str(flow_value(rng))]),
        user_id=rng.choice([None, "", "staff-1", "lead-2", "bob"]),
        final_output=rng.choice([None, "", "answer"]),
        incomplete_reasons=rng.choice(
            [[], ["incomplete_timeout"], ["build_error"]] if status == "incomplete" else [[]]
        ),
        start_time_unix_nano=start,
        end_time_unix_nano=start + rng.choice([0, 10**9, 700 * 10**9, 10**18]),
    )


def gen_condition(rng: random.Random) -> dict[str, Any]:
    ops: dict[str, Any] = {}
    for _ in range(rng.randint(1, 2)):
        op = rng.choice(["equals", "not_equals", "one_of", "exists", "gt", "gte", "lt", "lte"])
        if op in ("equals", "not_equals"):
            ops[op] = gen_json(rng, 5)
        elif op == "one_of":
            ops[op] = [gen_json(rng, 5) for _ in range(rng.randint(1, 3))]
        elif op == "exists":
            ops[op] = rng.random() < 0.5
        else:
            ops[op] = rng.choice([0, 1, 12.5, 2020, 1e300, -1])
    return ops


def gen_matcher(rng: random.Random) -> dict[str, Any]:
    m: dict[str, Any] = {}
    if rng.random() < 0.6:
        m["kind"] = rng.choice([rng.choice(STEP_KINDS), ["tool", "approval"], "tool"])
    if rng.random() < 0.6:
        m["name"] = rng.choice([*NAMES, "update_*", "*approv*", "?etch", ["search", "fetch*"]])
    if rng.random() < 0.2:
        m["agent"] = rng.choice(["support-*", "paper-agent"])
    if rng.random() < 0.3:
        m["status"] = rng.choice(["ok", "error"])
    if rng.random() < 0.2:
        m["attributes"] = {rng.choice(["enduser.id", "a"]): gen_condition(rng)}
    if rng.random() < 0.3:
        path = rng.choice(["$.customer_id", "year_from", "$.nested.q", "$", "$.ü[0]", "amount"])
        m["args"] = {path: gen_condition(rng)}
    return m


def gen_rule(rng: random.Random, i: int) -> dict[str, Any]:
    base: dict[str, Any] = {
        "id": f"r{i}",
        "reason": "generated",
        "severity": rng.choice(["info", "low", "medium", "high", "critical"]),
        "on_fail": rng.choice(["FAIL", "REVIEW", "QUARANTINE"]),
    }
    if rng.random() < 0.1:
        base["when"] = {"input": gen_condition(rng)}
    kind = rng.choice(
        [
            *("budget", "recovery", "presence", "absence", "trajectory", "tool_args"),
            *("secrets", "pii", "consistency", "mcp", "precedes", "precedes"),
            *("flow", "retrieval"),
        ]
    )
    base["type"] = kind
    if kind == "precedes":
        gen_precedes(rng, base)
    elif kind == "budget":
        for key in rng.sample(
            [
                "max_steps",
                "max_tool_calls",
                "max_llm_calls",
                "max_tokens",
                "max_cost_usd",
                "max_duration_ms",
                "max_same_call",
                "max_consecutive_same_call",
                "max_same_tool",
            ],
            rng.randint(1, 4),
        ):
            limits = [1, 2, 3, 5, 10] if "same" in key else [0, 1, 3, 0.5, 600000]
            base[key] = rng.choice(limits)
    elif kind in ("secrets", "pii"):
        base["detectors"] = rng.sample(["api_key", "email", "credit_card"], rng.randint(0, 3))
        if rng.random() < 0.5:
            base["patterns"] = dict(rng.sample(sorted(PATTERNS.items()), rng.randint(1, 2)))
        base["scope"] = rng.choice(["arguments", "results", "both"])
    elif kind == "mcp":
        if rng.random() < 0.6:
            base["servers"] = rng.choice(["crm-server", ["crm-server", "crm.internal:*"], "*"])
        if rng.random() < 0.6:
            base["tools"] = rng.choice(
                [["search", "update_*"], {"crm-*": ["lookup_customer", "update_account"]}, {}]
            )
        base["unknown_server"] = rng.choice(["review", "fail", "allow"])
    elif kind == "consistency":
        base["step"] = gen_matcher(rng)
        base["attribute"] = rng.choice(["enduser.id", "a"])
        if rng.random() < 0.3:
            base["root_attribute"] = rng.choice(["enduser.id", "a"])
        base["missing"] = rng.choice(["pass", "fail"])
    elif kind == "flow":
        gen_flow_rule(rng, base)
    elif kind == "retrieval":
        gen_retrieval_rule(rng, base)
    elif kind == "recovery":
        base["require_retry"] = rng.random() < 0.7
    elif kind == "presence":
        base["step"] = gen_matcher(rng)
        base["min_count"] = rng.randint(0, 2)
        if rng.random() < 0.3:
            base["max_count"] = rng.randint(0, 3)
    elif kind == "absence":
        if rng.random() < 0.5:
            base["step"] = gen_matcher(rng)
        else:
            base["allowed_tools"] = rng.sample([*NAMES, "update_*"], 2)
    elif kind == "trajectory":
        base["expected"] = [gen_matcher(rng) for _ in range(rng.randint(1, 4))]
        base["order"] = rng.choice(["strict", "in_order", "any_order"])
        base["min_match_rate"] = rng.choice([1.0, 0.5, 0.66, 0.0])
    else:
        base["step"] = gen_matcher(rng)
        base["args"] = {rng.choice(["year_from", "$.customer_id", "amount"]): gen_condition(rng)}
        base["required"] = rng.random() < 0.5
    return base


BINDINGS = [
    {"approval_argument": "$.customer_id", "action_argument": "$.customer_id"},
    {"approval_result": "$.customer_id", "action_argument": "customer_id"},
    {"approval_result": "$", "action_argument": "$.q"},
    {"approval_argument": "$.nested.q", "action_argument": "$.q"},
    {"approval_argument": "$", "action_argument": "$"},
]


def gen_precedes(rng: random.Random, base: dict[str, Any]) -> None:
    """A precedes rule with any of its options, mostly about approvals and writes."""
    base["before"] = rng.choice(
        [{"kind": "approval"}, {"kind": "approval", "name": "request_approval"}, gen_matcher(rng)]
    )
    base["then"] = rng.choice(
        [{"kind": "tool", "name": "update_*"}, {"kind": "state_change"}, gen_matcher(rng)]
    )
    for option in ("require_ok", "same_agent", "require_approved", "causal"):
        if rng.random() < 0.5:
            base[option] = rng.random() < 0.8
    if rng.random() < 0.6:
        base["same_subject"] = rng.sample(BINDINGS, rng.randint(1, 2))
    if rng.random() < 0.3:
        base["subject_reason"] = "other_subject"
    if rng.random() < 0.3:
        base["causal_reason"] = "decided_too_early"


def gen_approvals(rng: random.Random) -> dict[str, Any]:
    """A pack's approval recogniser: its tools, its own result shapes, the defaults or not."""
    shapes = [
        {"path": "$.grant", "approved": ["yes", 1], "denied": [False, "no"], "pending": ["later"]},
        {"path": "$.decision", "approved": ["OK"], "denied": ["nope"]},
        {"path": "$", "denied": ["done"]},
    ]
    return {
        "tools": rng.choice([["request_*", "Ü*"], ["*approv*", "fetch"], ["request_approval"]]),
        "results": rng.sample(shapes, rng.randint(0, 2)),
        "defaults": rng.random() < 0.7,
    }


def gen_flow_rule(rng: random.Random, rule: dict[str, Any]) -> None:
    # plain matchers half the time, so that sources and sinks are found and values flow
    plain = [{"kind": "tool"}, {"name": rng.choice(NAMES)}, {"kind": "tool", "status": "ok"}]
    roll = rng.random()
    if roll < 0.2:
        rule["source"] = "input"
    else:
        rule["source"] = rng.choice([gen_matcher(rng), rng.choice(plain)])
        if roll < 0.6:
            path = rng.choice(["$.token", "$.items[0]", "$", "$.nested.q", "$[1].nested"])
            rule["source"]["result_path"] = path
    rule["sink"] = rng.choice([gen_matcher(rng), rng.choice(plain)])
    if rng.random() < 0.7:
        rule["min_length"] = rng.choice([2, 3, 6, 8, 12])
    if rng.random() < 0.5:
        rule["expect"] = rng.choice(["absent", "present"])


def gen_retrieval_rule(rng: random.Random, rule: dict[str, Any]) -> None:
    if rng.random() < 0.3:
        rule["steps"] = gen_matcher(rng)
    options: dict[str, list[Any]] = {
        "before_answer": [True, False],
        "min_documents": [1, 2, 3],
        "min_score": [0.5, 0.6, 0.85, 1, -1.5],
        "max_age": ["180d", "1h", 90, "2w", 0.5, "3650d"],
        "age_field": ["$.updated", "$.meta.date", "$", "$.updated[0]"],
    }
    for key, values in options.items():
        if rng.random() < 0.5:
            rule[key] = rng.choice(values)
    if rng.random() < 0.5:
        access: dict[str, Any] = {}
        if rng.random() < 0.5:
            access["label"] = rng.choice(["$.access", "$.score", "$"])
        if rng.random() < 0.7:
            access["allowed"] = rng.sample(["public", "internal", "3", "True"], rng.randint(0, 2))
        if rng.random() < 0.6:
            access["users"] = {"staff-*": ["internal"], "lead-?": ["internal", "confidential"]}
        if rng.random() < 0.7:
            access["unlabeled"] = rng.choice(["allow", "review", "deny"])
        rule["access"] = access


def gen_pack(rng: random.Random, n: int) -> RulePack | None:
    data: dict[str, Any] = {
        "name": "generated",
        "version": "1",
        "owner": "tests",
        "rules": [gen_rule(rng, i) for i in range(n)],
    }
    if rng.random() < 0.2:
        data["selector"] = {"agent": rng.choice(["support-*", "paper-agent"])}
    if rng.random() < 0.3:
        data["approvals"] = gen_approvals(rng)
    try:
        return RulePack.model_validate(data)
    except ValidationError:
        return None


@dataclass
class Fuzzed:
    """What generated rounds found: rounds and runs compared, differences, results the
    interpreter left to Python."""

    rounds: int = 0
    runs: int = 0
    found: list[str] = dataclasses.field(default_factory=list)
    deferred: int = 0


def fuzz_share(worker: int, workers: int, runs: int) -> Fuzzed:
    """One process's share of the differential test (`on_every_core`): its own seed, and its
    part of the `runs` generated in all."""
    return fuzz(worker, 10**9, runs=-(-runs // workers))


def fuzz(seed: int, count: int, deadline: float | None = None, runs: int | None = None) -> Fuzzed:
    """`count` generated rounds (a pack and its runs) from `seed`, compared; stops early at
    `deadline` (time.monotonic()) or once `runs` runs are compared."""
    import time

    rng = QuickRandom(seed)
    out = Fuzzed()
    for i in range(count):
        if deadline is not None and time.monotonic() > deadline:
            break
        if runs is not None and out.runs >= runs:
            break
        pack = gen_pack(rng, rng.randint(1, 6))
        trajectories = [gen_run(rng, 12) for _ in range(rng.randint(1, 80))]
        out.rounds += 1
        if pack is None:
            continue
        tables = round_tables(trajectories)
        diffs, deferred = differences(trajectories, pack, f"seed {seed} round {i}", tables)
        out.runs += len(trajectories)
        out.found += diffs
        out.deferred += deferred
    return out
