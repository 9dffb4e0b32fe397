"""Re-evaluate stored trajectories under a pack and compare with the verdicts they got live."""

from __future__ import annotations

import multiprocessing
import time
import uuid
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime
from itertools import repeat
from pathlib import Path

import pyarrow as pa

from collector.errors import SextantError
from collector.evaluation.packs import pack_files
from collector.evaluation.results import trajectory_result_columns
from collector.replay.cases import pack_verdict
from collector.replay.evaluate import evaluated
from collector.store.runs import Opener, Source, load_results, run_tables
from collector.store.tables import columns_table
from evaluators.base import Result, overall_verdict
from evaluators.rulepack import LoadedPack, RulePackError, load_pack, load_text

BATCH = 2000


@dataclass
class Change:
    trace_id: str
    rule: str  # pack/rule
    old: str  # verdict, or "-" when the rule did not apply
    new: str
    reason: str


@dataclass
class TraceOutcome:
    old: str  # overall verdict stored live ("none" when no rule applied)
    new: str
    reasons: list[str]  # reasons of the new failing and review results


@dataclass
class Report:
    replay_id: str
    packs: list[LoadedPack]
    changes: list[Change] = field(default_factory=list)
    outcomes: dict[str, TraceOutcome] = field(default_factory=dict)
    results: int = 0
    elapsed_seconds: float = 0.0
    stored: int = 0

    @property
    def transitions(self) -> Counter[tuple[str, str]]:
        return Counter((o.old, o.new) for o in self.outcomes.values() if o.old != o.new)


def packs_from_paths(paths: list[Path]) -> list[LoadedPack]:
    files = pack_files(paths)
    if not files:
        raise SextantError(f"no rule packs at {', '.join(map(str, paths))}")
    packs = []
    for path in files:
        try:
            packs.append(load_pack(path))
        except RulePackError as exc:
            raise SextantError("\n".join(exc.errors)) from exc
    return packs


def current_packs(source: Source) -> list[LoadedPack]:
    """The packs in force: a running collector says which versions; a stored copy has each
    pack's most recently loaded version."""
    status = source.rules_status()
    if status is not None:
        shas = [p["sha256"] for p in status["packs"] if p["sha256"]]
        table = source.query(
            "SELECT name, text, sha256 FROM rule_packs"
            " WHERE sha256 IN (SELECT unnest(?::VARCHAR[]))"
            " QUALIFY row_number() OVER (PARTITION BY sha256 ORDER BY loaded_at DESC) = 1",
            [shas],
        )
    else:
        table = source.query(
            "SELECT name, text, sha256 FROM rule_packs"
            " QUALIFY row_number() OVER (PARTITION BY name ORDER BY loaded_at DESC) = 1"
        )
    if not table.num_rows:
        raise SextantError(f"no rule packs recorded in {source.name}; give --rules PATH")
    packs = []
    for row in sorted(table.to_pylist(), key=lambda r: r["name"]):
        try:
            packs.append(load_text(row["text"], f"rule_packs:{row['name']}@{row['sha256'][:12]}"))
        except RulePackError as exc:
            raise SextantError("\n".join(exc.errors)) from exc
    return packs


def overall(results: list[Result]) -> str:
    return overall_verdict(results).value if results else "none"


def settled(verdict: str) -> bool:
    return verdict in ("-", "pass", "not_applicable")


def compare(trace_id: str, old: list[dict], new: list[Result]) -> list[Change]:
    before = {f"{r['pack']}/{r['rule_id']}": r for r in old}
    after = {f"{r.pack}/{r.rule_id}": r for r in new}
    changes = []
    for rule in sorted(set(before) | set(after)):
        o, n = before.get(rule), after.get(rule)
        old_v = o["verdict"] if o else "-"
        new_v = n.verdict.value if n else "-"
        old_reason = (o["reason"] or "") if o else ""
        new_reason = n.reason if n else ""
        # A rule that appears, disappears or does not apply changes nothing unless it objects.
        if settled(old_v) and settled(new_v):
            continue
        if old_v != new_v or old_reason != new_reason:
            changes.append(Change(trace_id, rule, old_v, new_v, new_reason or old_reason))
    return changes


def only_packs(
    old: dict[str, list[dict]], verdicts: dict[str, str], names: set[str]
) -> tuple[dict[str, list[dict]], dict[str, str]]:
    """The live results of the replayed packs only, and the verdict they gave together.

    A replay under one pack must not report another pack's failures as fixed: the stored
    verdict counts every pack, so where other packs had results it is taken from ours alone."""
    kept: dict[str, list[dict]] = {}
    verdicts = dict(verdicts)
    for trace_id, results in old.items():
        kept[trace_id] = [r for r in results if r["pack"] in names]
        if len(kept[trace_id]) != len(results):
            verdicts[trace_id] = pack_verdict(kept[trace_id]) if kept[trace_id] else "none"
    return kept, verdicts


@dataclass
class Batch:
    changes: list[Change]
    outcomes: dict[str, TraceOutcome]
    results: int
    rows: pa.Table | None


def replay_batch(
    source: Source,
    ids: list[str],
    packs: list[LoadedPack],
    replay_id: str | None,
    now: datetime,
    reference: bool = False,
) -> Batch:
    """One batch: three bulk reads, then evaluation (natively unless `reference`);
    `replay_id` set means keep result rows."""
    shas = {p.pack.name: p.sha256 for p in packs}
    old, verdicts = load_results(source, ids)
    old, verdicts = only_packs(old, verdicts, set(shas))
    batch = Batch([], {}, 0, None)
    runs = evaluated(*run_tables(source, ids), packs, reference)
    for t, results in runs:
        batch.results += len(results)
        batch.changes.extend(compare(t.trace_id, old.get(t.trace_id, []), results))
        batch.outcomes[t.trace_id] = TraceOutcome(
            verdicts.get(t.trace_id, "none"),
            overall(results),
            sorted({r.reason for r in results if r.verdict.value in ("fail", "review")}),
        )
    if replay_id is not None and batch.results:
        columns = trajectory_result_columns(runs, shas, now, replay_id)
        batch.rows = columns_table("results", columns, batch.results)
    return batch


# State of a replay worker process: its own handle on the source and its compiled packs.
_worker: dict = {}


def _start_worker(spec: Opener, texts: list[tuple[str, str]], reference: bool) -> None:
    _worker["source"] = spec.open()
    _worker["packs"] = [load_text(text, name) for text, name in texts]
    _worker["reference"] = reference


def _run_batch(ids: list[str], replay_id: str | None, now: datetime) -> Batch:
    return replay_batch(
        _worker["source"], ids, _worker["packs"], replay_id, now, _worker["reference"]
    )


def replay(
    spec: Opener,
    source: Source,
    trace_ids: list[str],
    packs: list[LoadedPack],
    now: datetime,
    write: bool = False,
    jobs: int = 1,
    progress: Callable[[int], None] = lambda done: None,
    reference: bool = False,
) -> tuple[Report, list[pa.Table]]:
    """Evaluate every selected trajectory under `packs`, in `jobs` processes when there is
    enough work (each reads its batches from the source itself), natively unless `reference`
    asks for the Python evaluators; with `write`, also return the result rows to store
    (evaluated at `now`)."""
    report = Report(uuid.uuid4().hex[:16], packs)
    replay_id = report.replay_id if write else None
    started = time.perf_counter()
    batches = [trace_ids[i : i + BATCH] for i in range(0, len(trace_ids), BATCH)]
    tables: list[pa.Table] = []
    done = 0

    def collect(batch: Batch) -> None:
        nonlocal done
        report.changes.extend(batch.changes)
        report.outcomes.update(batch.outcomes)
        report.results += batch.results
        if batch.rows is not None:
            tables.append(batch.rows)
        done += len(batch.outcomes)
        progress(done)

    if jobs > 1 and len(batches) > 1:
        texts = [(p.text, p.source) for p in packs]
        context = multiprocessing.get_context("spawn")  # never fork a process holding DuckDB
        with ProcessPoolExecutor(
            min(jobs, len(batches)),
            context,
            initializer=_start_worker,
            initargs=(spec, texts, reference),
        ) as pool:
            for batch in pool.map(_run_batch, batches, repeat(replay_id), repeat(now)):
                collect(batch)
    else:
        for ids in batches:
            collect(replay_batch(source, ids, packs, replay_id, now, reference))
    report.changes.sort(key=lambda c: (c.trace_id, c.rule))
    report.elapsed_seconds = time.perf_counter() - started
    return report, tables
