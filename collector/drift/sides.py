"""One side of a comparison (a window of a target's runs) as SQL over `trajectories`."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta

from collector.targets import Target
from evaluators.matchers import text_matches
from evaluators.window import DriftRule

# The columns every drift and reliability query reads; runs still open or incomplete have no
# trustworthy totals and are reviewed one by one already, so they stay out of the statistics.
RUN_COLUMNS = (
    "t.trace_id, t.revision, t.case_id, t.service_name, t.agent_name, t.service_version,"
    " t.end_time, t.steps, t.duration_ms, t.cost_usd, t.input_tokens, t.output_tokens,"
    " t.status, t.error_count, t.tool_calls, t.verdict, t.closed_at"
)
TARGET_COLUMNS = ("service_name", "agent_name", "service_version")


@dataclass(frozen=True)
class Side:
    """Runs of a side: conditions on the target, a time window on the run's end, optionally a
    saved snapshot or only the last N runs."""

    conditions: tuple[str, ...] = ()
    params: tuple[object, ...] = ()
    start: datetime | None = None
    end: datetime | None = None
    snapshot: str | None = None
    runs: int | None = None
    description: str = field(default="", compare=False)

    def sql(self) -> tuple[str, list[object]]:
        params: list[object] = []
        source = "trajectories t"
        where = ["t.agent_run", "t.status <> 'incomplete'"]
        if self.snapshot is not None:
            # A snapshot pins revisions: a rebuilt run does not change a frozen baseline.
            source += (
                " JOIN baseline_members m ON m.trace_id = t.trace_id"
                " AND m.revision = t.revision AND m.name = ?"
            )
            params.append(self.snapshot)
        else:
            where.append("t.is_current")
        where.extend(self.conditions)
        params.extend(self.params)
        if self.start is not None:
            where.append("t.end_time >= ?")
            params.append(self.start)
        if self.end is not None:
            where.append("t.end_time < ?")
            params.append(self.end)
        query = f"SELECT {RUN_COLUMNS} FROM {source} WHERE {' AND '.join(where)}"
        if self.runs is not None:
            query = f"SELECT * FROM ({query} ORDER BY t.end_time DESC LIMIT {int(self.runs)})"
        return query, params


def exactly(target: Target) -> tuple[tuple[str, ...], tuple[object, ...]]:
    """Conditions for one target (a missing service.version is a value like any other)."""
    return tuple(f"t.{c} IS NOT DISTINCT FROM ?" for c in TARGET_COLUMNS), tuple(target)


def matching(
    service: str | list[str] | None = None,
    agent: str | list[str] | None = None,
    version: str | list[str] | None = None,
) -> tuple[tuple[str, ...], tuple[object, ...]]:
    """Conditions for glob patterns (as in pack selectors: one glob or a list, any of which
    matches); None matches anything."""
    conditions: list[str] = []
    params: list[object] = []
    for column, pattern in zip(TARGET_COLUMNS, (service, agent, version), strict=True):
        if pattern is not None:
            globs = [pattern] if isinstance(pattern, str) else pattern
            conditions.append("(" + " OR ".join(f"t.{column} GLOB ?" for _ in globs) + ")")
            params.extend(globs)
    return tuple(conditions), tuple(params)


def canary_sides(
    rule: DriftRule, target: Target, now: datetime, since: datetime | None
) -> tuple[Side, Side] | None:
    """A canary's sides: the baseline version's runs and its own over the same minutes."""
    assert rule.compare is not None
    start = now - timedelta(seconds=rule.current.last)
    conditions, params = exactly(target)
    pattern = rule.compare.baseline.version
    if target[2] is not None and text_matches(pattern, target[2]):
        return None
    if since is not None:
        start = since if rule.is_sequential else max(start, since)
    last = None if rule.is_sequential else rule.current.runs
    baseline = Side(
        (*conditions[:2], "t.service_version GLOB ?"),
        (*params[:2], pattern),
        start,
        now,
        runs=last,
        description=f"service.version {pattern} over the same window",
    )
    return baseline, Side(conditions, params, start, now, runs=last)


def sides(
    rule: DriftRule, target: Target, now: datetime, since: datetime | None = None
) -> tuple[Side, Side] | None:
    """(baseline, current) for a target, or None when the target is the baseline itself.

    A canary's sides cover the same minutes, from the canary's first run (`since`) at the
    earliest: production runs from before the candidate existed are not what it is compared
    with (a daily ramp would look like a difference between versions). An anytime-valid canary
    covers its whole life, from that first run on."""
    if rule.compare is not None:
        return canary_sides(rule, target, now, since)
    start = now - timedelta(seconds=rule.current.last)
    version = target[2]
    conditions, params = exactly(target)
    same_agent, agent_params = conditions[:2], params[:2]
    current = Side(conditions, params, start, now, runs=rule.current.runs)
    spec = rule.baseline
    assert spec is not None  # the model requires baseline or compare
    if spec.snapshot is not None:
        baseline = Side(
            same_agent,
            agent_params,
            snapshot=spec.snapshot,
            description=f"snapshot {spec.snapshot}",
        )
    elif spec.version is not None:
        if version is not None and text_matches(spec.version, version):
            return None
        since = now - timedelta(seconds=spec.last) if spec.last else None
        baseline = Side(
            (*same_agent, "t.service_version GLOB ?"),
            (*agent_params, spec.version),
            since,
            now,
            description=f"service.version {spec.version}"
            + (f" over the last {spec.last:g} s" if spec.last else ""),
        )
    else:
        assert spec.last is not None
        baseline = Side(
            conditions,
            params,
            start - timedelta(seconds=spec.last),
            start,
            description=f"the {spec.last:g} s before the current window",
        )
    return baseline, current
