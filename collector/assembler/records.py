"""A round's trajectories as the `trajectories`, `steps` and `results` tables, built column by
column: each column is one list filled from the round's objects and converted to Arrow once.
A dict per row cost more than the row's values, and converting the dicts to Arrow as much
again (docs/performance.md)."""

from __future__ import annotations

from datetime import datetime
from operator import attrgetter
from typing import Any

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
    """The rows of one assembly round: its trajectories, with what the store keeps beside each
    (when its spans were received, its results, why it could not be built), and the tables they
    make, built once for the whole round."""

    def __init__(self, closed_at: datetime, shas: dict[str, str]) -> None:
        self.closed_at = closed_at
        self.shas = shas  # pack -> sha256 of the version its results were evaluated under
        self.runs: list[Trajectory] = []
        self.totals: list[dict[str, Any]] = []
        self.received: list[tuple[datetime, datetime]] = []  # first and last span received
        self.results: list[list[Result]] = []
        self.build_errors: list[str | None] = []
        self.arguments: list[str | None] = []
        self.mcp: list[str | None] = []

    def add(
        self,
        t: Trajectory,
        received: tuple[datetime, datetime],
        results: list[Result],
        encoded: tuple[list[str | None], list[str | None]],
        build_error: str | None = None,
    ) -> None:
        """A trajectory and its results; `encoded` is `step_json(t.steps)`."""
        totals = t.totals()  # the last thing that can raise: nothing of `t` is kept before it
        self.runs.append(t)
        self.totals.append(totals)
        self.received.append(received)
        self.results.append(results)
        self.build_errors.append(build_error)
        self.arguments.extend(encoded[0])
        self.mcp.extend(encoded[1])

    def tables(self) -> dict[str, pa.Table]:
        return {
            "trajectories": self.trajectories(),
            "steps": self.steps(),
            "results": self.results_table(),
        }

    def trajectories(self) -> pa.Table:
        runs, count = self.runs, len(self.runs)
        columns: dict[str, list[Any]] = {
            name: list(map(get, runs)) for name, get in TRAJECTORY_ATTRIBUTES
        }
        columns.update({name: [totals[name] for totals in self.totals] for name in TOTALS})
        columns["is_current"] = [True] * count
        columns["incomplete_reasons"] = [t.incomplete_reasons or None for t in runs]
        columns["first_received_at"] = [first for first, _ in self.received]
        columns["last_received_at"] = [last for _, last in self.received]
        columns["closed_at"] = [self.closed_at] * count
        # No rule applied: no verdict (an unevaluated run is not a pass).
        columns["verdict"] = [overall_verdict(r).value if r else None for r in self.results]
        columns["verdict_reasons"] = [
            sorted({x.reason for x in r if x.reason}) or None for r in self.results
        ]
        columns["verdict_rules"] = [objecting_rules(r) for r in self.results]
        columns["build_error"] = self.build_errors
        # Totals past their column's range (token counts summed past int64) are kept as text;
        # the run was evaluated on the true value.
        kept = out_of_range("trajectories", columns, count)
        columns["unrepresentable"] = [None if k is None else orjson.dumps(k).decode() for k in kept]
        return columns_table("trajectories", columns, count)

    def steps(self) -> pa.Table:
        steps = [s for t in self.runs for s in t.steps]
        owners = [t for t in self.runs for _ in t.steps]
        columns: dict[str, list[Any]] = {
            name: list(map(get, steps)) for name, get in STEP_ATTRIBUTES
        }
        columns["trace_id"] = [t.trace_id for t in owners]
        columns["revision"] = [t.revision for t in owners]
        columns["arguments"] = self.arguments
        columns["mcp"] = self.mcp
        return columns_table("steps", columns, len(steps))

    def results_table(self) -> pa.Table:
        columns = trajectory_result_columns(
            zip(self.runs, self.results, strict=True), self.shas, self.closed_at
        )
        return columns_table("results", columns, len(columns["trace_id"]))
