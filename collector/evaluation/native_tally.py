"""A natively evaluated round counted into its evaluator's `Tally` from the round's columns, as
`RoundEvaluator.evaluate` counts it run by run (`Tally.count`, `Tally.count_run`,
`Runs.count_facts`): from the `trajectories` columns, the `steps` table and the round's results
(collector/evaluation/native_results.py), with no `Result` or `RunFacts` object per run.

What the tally's readers iterate keeps the order the Python path gives it: outcomes, verdicts,
packs applied and targets in the order they first appear, scores and each target's durations
in the round's order (the target cap takes targets in the order they first appear). Examples
are last-wins per key, as there. The differential test (tests/unit/assembler/test_native_work.py)
holds the two tallies equal."""

from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.compute as pc

from collector.evaluation.round import Tally
from collector.evaluation.runs import Runs
from collector.targets import Target

OUTCOME = ["pack", "rule_id", "verdict", "reason"]


def count_round(
    tally: Tally,
    columns: dict[str, list[Any]],
    steps: pa.Table,
    results: pa.Table,
    verdicts: list[str | None],
) -> None:
    """The round in the tally: `columns` are the runs' `trajectories` columns (`trace_id`,
    `revision`, `agent_run`, the target's, times, tokens and cost), `verdicts` each run's
    overall verdict (None: no result)."""
    count_mcp(tally, columns, steps)
    count_applied(tally, results)
    if results.num_rows:
        agent_runs = np.array(columns["agent_run"], dtype=bool)
        taken = agent_runs[results["run"].to_numpy()]
        count_outcomes(tally, columns["trace_id"], results.filter(pa.array(taken)))
    count_verdicts(tally, columns, verdicts, tool_errors(columns, steps))


def count_mcp(tally: Tally, columns: dict[str, list[Any]], steps: pa.Table) -> None:
    """MCP steps, for the inventory (`Sightings.count`)."""
    services = dict(zip(columns["trace_id"], columns["service_name"], strict=True))
    facts = steps.select(["trace_id", "span_kind", "tool_name", "mcp", "start_time_unix_nano"])
    for step in facts.filter(pc.is_valid(facts["mcp"])).to_pylist():
        tool = step["tool_name"] if step["span_kind"] == "tool" else None
        mcp = orjson.loads(step["mcp"])
        service = services[step["trace_id"]] or ""
        tally.mcp.count_step(service, mcp, tool, step["start_time_unix_nano"])


def tool_errors(columns: dict[str, list[Any]], steps: pa.Table) -> list[int]:
    """Each run's tool calls that failed (`RunFacts.tool_errors`)."""
    errored = pc.and_(pc.equal(steps["span_kind"], "tool"), pc.equal(steps["status"], "error"))
    counts = Counter(steps["trace_id"].filter(errored).to_pylist())
    return [counts[trace_id] for trace_id in columns["trace_id"]]


def groups(table: pa.Table, keys: list[str]) -> pa.Table:
    """The distinct `keys` of the table's rows, each with its rows' count (`row_count`) and
    its first and last row (`row_min`, `row_max`), in the order they first appear."""
    rows = table.select(keys).append_column("row", pa.array(np.arange(table.num_rows)))
    aggregated = rows.group_by(keys, use_threads=False).aggregate(
        [("row", "count"), ("row", "min"), ("row", "max")]
    )
    return aggregated.sort_by("row_min")


def count_applied(tally: Tally, results: pa.Table) -> None:
    """The packs that gave each run a result (every run, agent run or not)."""
    if not results.num_rows:
        return
    pairs = groups(results, ["run", "pack"])  # a pack counts once a run
    for pack, count in zip(
        *groups(pairs, ["pack"]).select(["pack", "row_count"]).to_pydict().values(), strict=True
    ):
        tally.applied[pack] += count


def count_outcomes(tally: Tally, trace_ids: list[str], results: pa.Table) -> None:
    """The agent runs' results: outcomes, their examples, scores and evaluator errors."""
    if not results.num_rows:
        return
    runs = results["run"].to_numpy()
    for outcome in groups(results, OUTCOME).to_pylist():
        key = (outcome["pack"], outcome["rule_id"], outcome["verdict"], outcome["reason"])
        tally.outcomes[key] += outcome["row_count"]
        tally.examples[key] = trace_ids[runs[outcome["row_max"]]]
    scored = pc.and_(pc.equal(results["rule_type"], "trajectory"), pc.is_valid(results["score"]))
    scores = results.filter(scored)
    tally.scores += zip(
        scores["pack"].to_pylist(),
        scores["rule_id"].to_pylist(),
        scores["score"].to_pylist(),
        strict=True,
    )
    errors = results.filter(pc.equal(results["reason"], "evaluator_error"))
    for pack, rule, message in zip(
        errors["pack"].to_pylist(),
        errors["rule_id"].to_pylist(),
        errors["message"].to_pylist(),
        strict=True,
    ):
        tally.errors[(pack, rule)] = message


def count_verdicts(
    tally: Tally, columns: dict[str, list[Any]], verdicts: list[str | None], errors: list[int]
) -> None:
    """Each agent run's verdict ("none" without results), and the first revision of each
    agent run in its target's `Runs`."""
    trace_ids = columns["trace_id"]
    counted = [
        (i, verdict or "none")
        for i, (verdict, agent_run) in enumerate(zip(verdicts, columns["agent_run"], strict=True))
        if agent_run
    ]
    tally.verdicts.update(v for _, v in counted)
    tally.examples.update(((v,), trace_ids[i]) for i, v in counted)
    revisions = columns["revision"]
    services, agents, versions = (
        columns[name] for name in ("service_name", "agent_name", "service_version")
    )
    targets: dict[tuple[str, str, str], list[tuple[int, str]]] = {}
    for i, verdict in counted:
        if revisions[i] <= 1:
            key = (services[i] or "", agents[i] or "", versions[i] or "")
            targets.setdefault(key, []).append((i, verdict))
    for key, counted_runs in targets.items():
        runs = tally.targets.setdefault(Target(*key), Runs())
        count_target(runs, columns, counted_runs, errors)


def count_target(
    runs: Runs, columns: dict[str, list[Any]], counted: list[tuple[int, str]], errors: list[int]
) -> None:
    """A target's runs in the round, in order (`Runs.count_facts` for each)."""
    trace_ids = columns["trace_id"]
    starts, ends = columns["start_time_unix_nano"], columns["end_time_unix_nano"]
    runs.verdicts.update(v for _, v in counted)
    runs.examples.update((v, trace_ids[i]) for i, v in counted)
    # `RunFacts.duration_ms`, then `count_facts`'s seconds
    runs.seconds += [
        (max((ends[i] - starts[i]) / 1e6, 0.0) / 1000, trace_ids[i]) for i, _ in counted
    ]
    runs.input_tokens += sum(columns["input_tokens"][i] for i, _ in counted)
    runs.output_tokens += sum(columns["output_tokens"][i] for i, _ in counted)
    cost = columns["cost_usd"]
    for i, _ in counted:  # one addition after the other: a float sum depends on its order
        runs.cost_usd += cost[i] or 0.0
    failed = [i for i, _ in counted if errors[i]]
    if failed:
        runs.tool_errors += sum(errors[i] for i in failed)
        runs.examples["tool_error"] = trace_ids[failed[-1]]
