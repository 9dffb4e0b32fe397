"""A round's results with the native rule interpreter: each pack's natively supported rules
evaluated over the round's tables at once, the rest (rules it refuses, results it defers) by
the Python evaluators on the few runs that need them, merged in the pack's rule order as
`evaluate_pack` gives them, as Arrow rows (collector/evaluation/native_results.py): no Python
object per result. The Python evaluators stay the specification; the differential
test (tests/unit/assembler/test_native_work.py) holds the two paths equal."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from collector.evaluation import native_rules
from collector.evaluation.native_results import (
    OBJECTING,
    RESULTS,
    audited,
    python_results,
)
from collector.evaluation.packs import PackText, compiled
from evaluators.base import Result
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
    python_rules: frozenset[str]  # refused rules `evaluate_pack` evaluates on each run

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
        frozenset(r.id for r in pack.rules if r.id in refused and per_run(r)),
    )
    with _natives_lock:
        _natives[key] = made
        while len(_natives) > NATIVE_PACKS:
            _natives.popitem(last=False)
    return made


class Run(NamedTuple):
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
) -> pa.Table:
    """The round's results (`native_results.RESULTS`), packs in the order given, each as
    `evaluate_pack` gives them pack by pack. `steps` carries the span attributes' JSON
    (`attributes`); `trajectory(i)` builds run i in Python, asked only for the runs a rule
    left to Python applies to."""
    natives = [native_pack(text) for text in packs]
    rows = native_rules.evaluate_packs([n.native for n in natives], trajectories, steps)
    index = {run.trace_id: i for i, run in enumerate(runs)}
    names = {n.pack.name: p for p, n in enumerate(natives)}
    held = rows["deferred"].is_valid()
    # run -> pack -> rules deferred to Python
    deferred: dict[int, dict[int, set[str]]] = {}
    for row in rows.filter(held).select(["trace_id", "pack", "rule_id"]).to_pylist():
        by_pack = deferred.setdefault(index[row["trace_id"]], {})
        by_pack.setdefault(names[row["pack"]], set()).add(row["rule_id"])
    found = native_results(natives, rows.filter(pc.invert(held)), trajectories)
    with_python = [p for p, n in enumerate(natives) if n.python_rules]
    built: dict[int, Trajectory] = {}
    subsets: dict[tuple[int, frozenset[str]], RulePack] = {}
    applies: dict[tuple[int, bool, str | None, str | None, str | None], bool] = {}
    python: list[tuple[int, Result]] = []
    for i, run in enumerate(runs):
        extra = deferred.get(i, {})
        for p in sorted({*with_python, *extra}) if extra else with_python:
            native = natives[p]
            # what `python_applies` reads of the run: the same for many runs
            target = (p, run.agent_run, run.service_name, run.agent_name, run.service_version)
            if target not in applies:
                applies[target] = python_applies(native.pack, run)
            if applies[target]:
                if i not in built:
                    built[i] = trajectory(i)
                left = native.python_rules | extra.get(p, set())
                subset = subsets.get((p, left))
                if subset is None:
                    subset = subsets[(p, left)] = native.subset(left)
                python += [(i, r) for r in evaluate_pack(built[i], subset)]
    if python:
        found = in_order(natives, pa.concat_tables([found, python_results(python)]))
    for native in natives:
        audit = native.pack.review.audit
        if audit is not None:
            found = audited(found, trajectories["trace_id"], native.pack.name, audit)
    return found


def native_results(natives: list[NativePack], rows: pa.Table, trajectories: pa.Table) -> pa.Table:
    """The interpreter's result rows as a round's results: the run of each, and the reason
    `result_of` gives (the rule's own when it decided and the finding gave none, else "")."""
    run = pc.index_in(rows["trace_id"], value_set=trajectories["trace_id"].combine_chunks())
    packs, positions = rule_positions(natives, rows)
    reasons: list[str] = []  # each pack's rules' reasons, pack after pack
    offsets = np.zeros(len(natives), dtype=np.int64)
    for p, native in enumerate(natives):
        offsets[p] = len(reasons)
        reasons += [rule.reason for rule in native.pack.rules]
    own = pa.array(reasons, pa.string()).take(pa.array(offsets[packs] + positions))
    decided = pc.is_in(rows["verdict"], pa.array(OBJECTING, pa.string()))
    reason = pc.coalesce(rows["reason"], pc.if_else(decided, own, ""))
    columns = {name: rows[name] for name in RESULTS.names if name in rows.column_names}
    columns.update({"run": run.cast(pa.int64()), "reason": reason})
    columns["audit"] = pa.repeat(pa.scalar(False), rows.num_rows)
    return pa.table([columns[name] for name in RESULTS.names], schema=RESULTS)


def rule_positions(natives: list[NativePack], rows: pa.Table) -> tuple[np.ndarray, np.ndarray]:
    """Each row's pack (its place among `natives`) and rule (its place in its pack)."""
    names = pa.array([n.pack.name for n in natives], pa.string())
    packs = pc.index_in(rows["pack"], value_set=names).to_numpy(zero_copy_only=False)
    positions = np.zeros(rows.num_rows, dtype=np.int64)
    for p, native in enumerate(natives):
        at = packs == p
        if at.any():
            ids = pa.array([rule.id for rule in native.pack.rules], pa.string())
            found = pc.index_in(rows["rule_id"].filter(pa.array(at)), value_set=ids)
            positions[at] = found.to_numpy(zero_copy_only=False)
    return packs, positions


def in_order(natives: list[NativePack], results: pa.Table) -> pa.Table:
    """Results sorted by run, pack (in the order evaluated) and rule (in its pack's order): a
    run's native and Python results of a pack merged in the pack's rule order (one result per
    rule at most; the sort is stable)."""
    packs, positions = rule_positions(natives, results)
    keys = pa.table({"run": results["run"], "pack": packs, "rule": positions})
    order = pc.sort_indices(
        keys, [("run", "ascending"), ("pack", "ascending"), ("rule", "ascending")]
    )
    return results.take(order)


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
