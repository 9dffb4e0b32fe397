"""A round's results with the native rule interpreter: each pack's natively supported rules
evaluated over the round's tables at once, the rest (rules it refuses, results it defers) by
the Python evaluators on the few runs that need them, merged in the pack's rule order as
`evaluate_pack` gives them. The Python evaluators stay the specification; the differential
test (tests/unit/assembler/test_native_work.py) holds the two paths equal."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from collector.evaluation import native_rules
from collector.evaluation.packs import PackText, compiled
from evaluators.base import Decision, Result, Severity, Verdict
from evaluators.evaluate import evaluate_pack
from evaluators.model import Trajectory
from evaluators.registry import RULE_TYPES
from evaluators.rulepack import RulePack
from evaluators.sessions import is_session_rule

NATIVE_PACKS = 64  # compiled pack versions kept per process, as `compiled` keeps its own
_natives: OrderedDict[tuple[str, frozenset[str]], NativePack] = OrderedDict()
_natives_lock = threading.Lock()


@dataclass(frozen=True)
class NativePack:
    """A pack version compiled for the interpreter, with what is left to Python."""

    pack: RulePack
    native: Any
    order: dict[str, int]  # rule id -> its place in the pack
    python_rules: frozenset[str]  # refused rules `evaluate_pack` evaluates on each run

    def in_order(self, results: list[Result]) -> list[Result]:
        """Results of the pack's rules in the pack's order (one result per rule at most)."""
        return sorted(results, key=lambda r: self.order[r.rule_id])

    def subset(self, ids: frozenset[str]) -> RulePack:
        """The pack with only the rules named (selector, approvals and review kept)."""
        return self.pack.model_copy(update={"rules": [r for r in self.pack.rules if r.id in ids]})


def per_run(rule: Any) -> bool:
    """Whether `evaluate_pack` evaluates the rule on each run (not over windows or sessions)."""
    return RULE_TYPES[rule.type].evaluate is not None and not is_session_rule(rule)


def native_pack(text: PackText) -> NativePack:
    """The pack compiled for the interpreter, once per version in this process."""
    key = (text.sha256, text.disabled_rules)
    with _natives_lock:
        found = _natives.get(key)
        if found is not None:
            _natives.move_to_end(key)
            return found
    pack = compiled(text)
    native = native_rules.compile_pack(pack)
    refused = {rule_id for rule_id, _ in native.refused}
    made = NativePack(
        pack,
        native,
        {r.id: i for i, r in enumerate(pack.rules)},
        frozenset(r.id for r in pack.rules if r.id in refused and per_run(r)),
    )
    with _natives_lock:
        _natives[key] = made
        while len(_natives) > NATIVE_PACKS:
            _natives.popitem(last=False)
    return made


def result_of_row(pack: NativePack, row: dict[str, Any]) -> Result:
    """A row of the interpreter as the `Result` `evaluate_pack` makes."""
    verdict = Verdict(row["verdict"])
    reason = row["reason"]
    if reason is None:  # `result_of`: the rule's own reason when it decided, else ""
        rule = pack.pack.rules[pack.order[row["rule_id"]]]
        reason = rule.reason if verdict in (Verdict.FAIL, Verdict.REVIEW) else ""
    requested = row["requested_decision"]
    return Result(
        pack=row["pack"],
        pack_version=row["pack_version"],
        rule_id=row["rule_id"],
        rule_type=row["rule_type"],
        verdict=verdict,
        severity=Severity(row["severity"]),
        reason=reason,
        message=row["message"],
        evidence=tuple(row["evidence_span_ids"] or ()),
        score=row["score"],
        requested_decision=None if requested is None else Decision(requested),
    )


@dataclass(frozen=True)
class Run:
    """What the merge reads of a run's row of the `trajectories` table."""

    trace_id: str
    agent_run: bool
    service_name: str | None
    agent_name: str | None
    service_version: str | None


def round_results(
    packs: tuple[PackText, ...],
    runs: list[Run],
    trajectories: pa.Table,
    steps: pa.Table,
    trajectory: Callable[[int], Trajectory],
) -> list[list[Result]]:
    """Each run's results, packs in the order given, as `evaluate_pack` gives them pack by
    pack. `steps` carries the span
    attributes' JSON (`attributes`); `trajectory(i)` builds run i in Python, asked only for
    the runs a rule left to Python applies to."""
    natives = [native_pack(text) for text in packs]
    rows = native_rules.evaluate_packs([n.native for n in natives], trajectories, steps)
    index = {run.trace_id: i for i, run in enumerate(runs)}
    names = {n.pack.name: p for p, n in enumerate(natives)}
    # (run, pack) -> native results; (run, pack) -> rules deferred to Python
    found: dict[tuple[int, int], list[Result]] = {}
    deferred: dict[tuple[int, int], set[str]] = {}
    for row in rows.to_pylist():
        key = (index[row["trace_id"]], names[row["pack"]])
        if row["deferred"] is not None:
            deferred.setdefault(key, set()).add(row["rule_id"])
        else:
            found.setdefault(key, []).append(result_of_row(natives[key[1]], row))
    built: dict[int, Trajectory] = {}
    out: list[list[Result]] = []
    for i, run in enumerate(runs):
        results: list[Result] = []
        for p, native in enumerate(natives):
            pack_results = found.get((i, p), [])
            left = native.python_rules | deferred.get((i, p), set())
            if left and python_applies(native.pack, run):
                if i not in built:
                    built[i] = trajectory(i)
                python = evaluate_pack(built[i], native.subset(frozenset(left)))
                pack_results = native.in_order(pack_results + python)
            results += native.pack.review.marked(run.trace_id, native.pack.name, pack_results)
        out.append(results)
    return out


def python_applies(pack: RulePack, run: Run) -> bool:
    """Whether `evaluate_pack` may give the run a result: an agent run its selector's target
    globs take (with attribute conditions, a run without a root is reviewed whatever its
    target, so those are always evaluated)."""
    if not run.agent_run:
        return False
    selector = pack.selector
    return bool(selector.attributes) or selector.matches_target(
        run.service_name, run.agent_name, run.service_version
    )
