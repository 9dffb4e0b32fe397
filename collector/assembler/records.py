"""A round's trajectories as the `trajectories`, `steps` and `results` tables, built column by
column: each column is one list, filled as trajectories are added and converted to Arrow once.
A dict per row, converted to Arrow row by row, cost about 2 µs more per span (a 10-span run's
share of its rows: 7 µs against 5; docs/performance.md)."""

from __future__ import annotations

from datetime import datetime
from operator import attrgetter
from typing import Any, NamedTuple

import orjson
import pyarrow as pa

from collector.evaluation.results import trajectory_result_columns
from collector.store.tables import ARROW_SCHEMAS, columns_table, out_of_range
from evaluators.base import Result, Verdict, overall_verdict
from evaluators.model import Step, Trajectory

OBJECTING = (Verdict.FAIL, Verdict.REVIEW)
# Columns of `steps` that are not the step's attribute of the same name.
STEP_OWN = ("trace_id", "revision", "arguments", "mcp")
STEP_ATTRIBUTES = tuple(
    (name, attrgetter(name)) for name in ARROW_SCHEMAS["steps"].names if name not in STEP_OWN
)
# Columns of `trajectories` that are the trajectory's attribute of the same name.
TRAJECTORY_ATTRIBUTES = tuple(
    (name, attrgetter(name))
    for name in (
        "trace_id",
        "revision",
        "status",
        "close_reason",
        "agent_run",
        "service_name",
        "agent_name",
        "service_version",
        "root_span_id",
        "root_name",
        "case_id",
        "conversation_id",
        "user_id",
        "input",
        "final_output",
        "span_count",
        "late_spans",
        "start_time_unix_nano",
        "end_time_unix_nano",
    )
)
TOTALS = (
    "steps",
    "tool_calls",
    "llm_calls",
    "input_tokens",
    "output_tokens",
    "cost_usd",
    "unpriced_llm_calls",
    "error_count",
)
# The columns of `trajectories` a trajectory's row is added to, in the order `add` makes them
# (`is_current` and `closed_at` are the round's, `unrepresentable` is found from the totals).
TRAJECTORY_COLUMNS = (
    *(name for name, _ in TRAJECTORY_ATTRIBUTES),
    *TOTALS,
    "incomplete_reasons",
    "first_received_at",
    "last_received_at",
    "verdict",
    "verdict_reasons",
    "verdict_rules",
    "build_error",
)
STEP_COLUMNS = ARROW_SCHEMAS["steps"].names


class RunKey(NamedTuple):
    """What the `results` rows of a trajectory say of it (kept instead of the trajectory)."""

    trace_id: str
    revision: int
    service_name: str | None
    agent_name: str | None
    service_version: str | None


def objecting_rules(results: list[Result]) -> list[str] | None:
    """pack/rule of the results that failed or reviewed the run (what the list filters by)."""
    objecting = {f"{r.pack}/{r.rule_id}" for r in results if r.verdict in OBJECTING}
    return sorted(objecting) or None


def step_json(steps: list[Step]) -> tuple[list[str | None], list[str | None]]:
    """The steps' `arguments` and `mcp` columns as JSON text. Encoding is what can fail on a
    step's values (nested past the encoder's depth), so it is done per trajectory, before the
    trajectory is added: one that fails is then stored as a build error alone."""
    arguments = [
        None
        if s.arguments is None
        else orjson.dumps(s.arguments, option=orjson.OPT_NON_STR_KEYS).decode()
        for s in steps
    ]
    mcp = [None if s.mcp is None else orjson.dumps(s.mcp).decode() for s in steps]
    return arguments, mcp


class RoundRows:
    """The rows of one assembly round, kept as one list per column of `trajectories`, `steps`
    and `results`, and made into Arrow tables once for the whole round. Each trajectory's
    values are taken as it is added: the round keeps no trajectory alive (thousands of live
    trajectories, steps and parsed attributes made the garbage collector cost more than the
    rows themselves)."""

    def __init__(self, closed_at: datetime, shas: dict[str, str]) -> None:
        self.closed_at = closed_at
        self.shas = shas  # pack -> sha256 of the version its results were evaluated under
        self.trajectories: dict[str, list[Any]] = {name: [] for name in TRAJECTORY_COLUMNS}
        self.steps: dict[str, list[Any]] = {name: [] for name in STEP_COLUMNS}
        self.results: list[tuple[RunKey, list[Result]]] = []

    def add(
        self,
        t: Trajectory,
        received: tuple[datetime, datetime],
        results: list[Result],
        encoded: tuple[list[str | None], list[str | None]],
        build_error: str | None = None,
    ) -> None:
        """A trajectory and its results; `received` is when its first and last spans were
        received, `encoded` is `step_json(t.steps)`. Its values are all computed before any is
        added, so one that raises leaves nothing behind."""
        totals = t.totals()
        row = [get(t) for _, get in TRAJECTORY_ATTRIBUTES]
        row += [totals[name] for name in TOTALS]
        row += [
            t.incomplete_reasons or None,
            *received,
            # No rule applied: no verdict (an unevaluated run is not a pass).
            overall_verdict(results).value if results else None,
            sorted({r.reason for r in results if r.reason}) or None,
            objecting_rules(results),
            build_error,
        ]
        key = RunKey(t.trace_id, t.revision, t.service_name, t.agent_name, t.service_version)
        for name, value in zip(TRAJECTORY_COLUMNS, row, strict=True):
            self.trajectories[name].append(value)
        steps = t.steps
        for name, get in STEP_ATTRIBUTES:
            self.steps[name].extend(map(get, steps))
        self.steps["trace_id"].extend([t.trace_id] * len(steps))
        self.steps["revision"].extend([t.revision] * len(steps))
        self.steps["arguments"].extend(encoded[0])
        self.steps["mcp"].extend(encoded[1])
        if results:
            self.results.append((key, results))

    def tables(self) -> dict[str, pa.Table]:
        trajectories = {name: list(values) for name, values in self.trajectories.items()}
        count = len(trajectories["trace_id"])
        trajectories["is_current"] = [True] * count
        trajectories["closed_at"] = [self.closed_at] * count
        # Totals past their column's range (token counts summed past int64) are kept as text;
        # the run was evaluated on the true value.
        kept = out_of_range("trajectories", trajectories, count)
        trajectories["unrepresentable"] = [
            None if k is None else orjson.dumps(k).decode() for k in kept
        ]
        results = trajectory_result_columns(self.results, self.shas, self.closed_at)
        return {
            "trajectories": columns_table("trajectories", trajectories, count),
            "steps": columns_table("steps", self.steps, len(self.steps["trace_id"])),
            "results": columns_table("results", results, len(results["trace_id"])),
        }
