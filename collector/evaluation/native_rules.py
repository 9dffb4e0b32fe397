"""A pack's rules for the native interpreter (`compile_pack`, in Rust), and its results.

The Python evaluators stay the specification; the interpreter is a second implementation of
some rule types, proven equal to them by tests/unit/evaluators/test_native_rules.py. This module
hands it a pack in its "native form": the pack model dumped without defaults, each step matcher
with its description (as messages quote it) and each JSON path split as `at_path` splits it.
Values the interpreter could not compare as Python does (dates, integers past 64 bits,
non-finite floats, non-text keys) are marked, and the interpreter refuses those rules.

The interpreter reads a round's `trajectories` and `steps` batches as the store has them, plus
one column the `steps` table does not carry: `attributes`, the span attributes' JSON text
(`Step.attributes_json`), where an approval override (`sextant.approval.status`) is read.
"""

from __future__ import annotations

import json
import math
from typing import Any

import pyarrow as pa

from collector.normalize.native import native
from evaluators import known_secrets
from evaluators.approvals import DEFAULT_APPROVALS
from evaluators.durations import duration_text
from evaluators.flow import FlowRule
from evaluators.matchers import MISSING, PATH_PART, Condition, StepMatcher
from evaluators.precedes import PrecedesRule
from evaluators.retrieval import RetrievalRule
from evaluators.rulepack import RulePack
from evaluators.secrets import API_KEY, DETECTORS, SecretsRule, ascii_form

# What a value is replaced by when the interpreter cannot compare it as Python does.
PYTHON_ONLY = "python_only_value"
INT_RANGE = (-(1 << 63), (1 << 64) - 1)


def json_native(value: Any) -> bool:
    """Whether the value is JSON that means to Rust what it means to Python."""
    if value is None or isinstance(value, bool | str):
        return True
    if isinstance(value, int):
        return INT_RANGE[0] <= value <= INT_RANGE[1]
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, list):
        return all(json_native(v) for v in value)
    if isinstance(value, dict):
        return all(isinstance(k, str) and json_native(v) for k, v in value.items())
    return False


def path_parts(path: str) -> list[str | int]:
    """`at_path`'s reading of a JSON path: keys, and list indexes (capped: past any list)."""
    parts: list[str | int] = []
    for key, index in PATH_PART.findall(path.removeprefix("$").lstrip(".")):
        parts.append(key if key else min(int(index), 1 << 63))
    return parts


def condition_form(condition: Condition) -> dict[str, Any]:
    data = condition.model_dump(exclude_defaults=True, by_alias=True)
    for key in ("equals", "not_equals"):
        value = getattr(condition, key)
        if value is not MISSING:
            data[key] = [value]  # boxed: `null` is a value to compare with
    values = [data.get("equals"), data.get("not_equals"), data.get("one_of")]
    if not json_native(values):
        return {PYTHON_ONLY: "a value JSON does not carry as Python holds it"}
    return data


def args_form(args: dict[str, Condition]) -> list[dict[str, Any]]:
    return [
        {"path": path, "parts": path_parts(path), "condition": condition_form(c)}
        for path, c in args.items()
    ]


def matcher_form(matcher: StepMatcher) -> dict[str, Any]:
    data = matcher.model_dump(exclude_defaults=True, by_alias=True)
    if matcher.args:
        data["args"] = args_form(matcher.args)
    if matcher.attributes:
        data["attributes"] = [
            {"key": key, "condition": condition_form(c)} for key, c in matcher.attributes.items()
        ]
    data["describe"] = matcher.describe()
    return data


def secrets_form(rule: SecretsRule, data: dict[str, Any]) -> None:
    """A secrets rule as its scanner's set: the RE2 patterns (`Scanner.set`), in its order,
    and the names of its detectors and patterns (its pass message lists them)."""
    scanner = rule.scanner
    sources = {d: ascii_form(DETECTORS[d]) for d in rule.detectors}
    sources.update(rule.patterns)
    patterns = [sources[name] for name in scanner.names]
    if scanner.checks.get("api_key") is API_KEY:
        patterns += known_secrets.prefilters()  # the keyword net last
        data["keywords"] = {
            "index": len(patterns) - 1,
            "assignment": known_secrets.ASSIGNMENT.pattern,
            "secret_key": known_secrets.SECRET_KEY.pattern,
            "placeholders": sorted(known_secrets.PLACEHOLDERS),
            "placeholder_parts": list(known_secrets.PLACEHOLDER_PARTS),
            "min_chars": known_secrets.MIN_VALUE_CHARS,
            "min_entropy": known_secrets.MIN_ENTROPY,
        }
    data.pop("detectors", None)
    data.pop("patterns", None)
    data["names"] = list(scanner.names)
    data["set"] = patterns


def flow_form(rule: FlowRule, data: dict[str, Any]) -> None:
    """A flow rule's source path split as `at_path` splits it."""
    if not isinstance(rule.source, str) and rule.source.result_path is not None:
        data["source"]["result_parts"] = path_parts(rule.source.result_path)


def retrieval_form(rule: RetrievalRule, data: dict[str, Any]) -> None:
    """A retrieval rule's paths split, and the texts its messages quote made as Python makes
    them (the age limit as `duration_text` writes it)."""
    for key in ("min_score", "max_age"):
        value = getattr(rule, key)
        if value is not None and not math.isfinite(value):
            data[key] = {PYTHON_ONLY: "a limit that is not a finite number"}
    data["age_field"] = rule.age_field
    data["age_parts"] = path_parts(rule.age_field)
    if rule.max_age is not None:
        data["max_age_text"] = duration_text(rule.max_age)
    if rule.access is not None:
        data["access"]["label"] = rule.access.label
        data["access"]["label_parts"] = path_parts(rule.access.label)


def rule_form(rule: Any) -> dict[str, Any]:
    data = rule.model_dump(exclude_defaults=True, by_alias=True)
    if isinstance(rule, SecretsRule):
        secrets_form(rule, data)
    for name, value in rule:
        if isinstance(value, StepMatcher):
            data[name] = matcher_form(value)
        elif isinstance(value, list) and value and isinstance(value[0], StepMatcher):
            data[name] = [matcher_form(m) for m in value]
    if rule.type == "tool_args":
        data["args"] = args_form(rule.args)
    if isinstance(rule, FlowRule):
        flow_form(rule, data)
    if isinstance(rule, RetrievalRule):
        retrieval_form(rule, data)
    if rule.when is not None and rule.when.input is not None:
        data["when"]["input"] = condition_form(rule.when.input)
    data["type"] = rule.type
    return data


def native_form(pack: RulePack) -> str:
    """The pack as JSON text for `compile_pack` of the native extension."""
    form: dict[str, Any] = {
        "name": pack.name,
        "version": pack.version,
        "selector": pack.selector.model_dump(exclude_defaults=True),
        "rules": [rule_form(r) for r in pack.rules],
    }
    from collector.evaluation.native_precedes import precedes_form  # (it imports this module)

    for rule, data in zip(pack.rules, form["rules"], strict=True):
        if isinstance(rule, PrecedesRule):
            precedes_form(rule, pack.approvals or DEFAULT_APPROVALS, data)
    if pack.approvals is not None:
        form["approvals"] = pack.approvals.model_dump(exclude_defaults=True)
    return json.dumps(form, default=lambda v: {PYTHON_ONLY: type(v).__name__}, allow_nan=True)


def compile_pack(pack: RulePack, partial: bool = True) -> Any:
    """The pack compiled for the interpreter. With `partial`, rules it cannot evaluate are
    left out (`.refused` says which and why); without, ValueError names the first."""
    return native.compile_pack(native_form(pack), partial)


def one_batch(table: pa.Table) -> pa.RecordBatch:
    """A table as one record batch (what the interpreter reads)."""
    batches = table.combine_chunks().to_batches()
    if not batches:
        return pa.RecordBatch.from_pylist([], schema=table.schema)
    return batches[0]


def evaluate(compiled: Any, trajectories: pa.Table, steps: pa.Table) -> pa.Table:
    """The native rules' results over a round: the `results` columns the evaluators make
    (without the round's own: sha, time, scope, origin), and `deferred`, set on the rows of a
    rule the interpreter left to Python for that run."""
    out = compiled.evaluate(one_batch(trajectories), one_batch(steps))
    return pa.Table.from_batches([pa.record_batch(out)])


def evaluate_packs(natives: list[Any], trajectories: pa.Table, steps: pa.Table) -> pa.Table:
    """Several packs' native rules over one round, its tables read once: each run's results
    pack by pack in the order given (as a round evaluates them)."""
    out = native.evaluate_packs(natives, one_batch(trajectories), one_batch(steps))
    return pa.Table.from_batches([pa.record_batch(out)])
