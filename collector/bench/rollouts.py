"""Canary rollouts as they run: runs of both versions accrue for hours, the rule is looked at every
`interval`, and any look may roll the canary back.

Each canary is a target of its own in a DuckDB store built with the collector's schema. Its runs
are read with the collector's own code (the sides of a canary rule, `sequential.load`), and its
e-processes computed as the collector computes them; what a look at minute t sees is the blocks
closed by then, so the lifetime decision is replayed look by look without re-reading the store.
A look fires when a test's weighted-Holm-adjusted anytime p-value is under `alpha` with at least
`min_samples` runs on each side. The effect-size thresholds are left out: they only ever stop a
firing, so the false ROLLBACK rates are upper bounds of the shipped rule's, and the detections
are those of a rule whose thresholds the shift clears (a 17-point drop, +50 % latency and a new
tool in 30 % of runs all clear the defaults).
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

import numpy as np
import pyarrow as pa

from collector.bench.calibration import RULES, Rate, add_run, canary_rule
from collector.bench.canaries import PASS_RATES, SHARES, Run, Shape, draw
from collector.drift import sequential
from collector.drift.sides import Side, exactly, sides
from collector.store.database import Database
from collector.targets import Target
from evaluators import sequential as stats
from evaluators.window import DriftRule

START = datetime(2026, 1, 1, 6, 0)
CHUNK = 50  # canaries per store
# A run's draw: (rng, seconds since the canary's first run, 1 for the candidate) -> Run
Draw = Callable[[np.random.Generator, float, int], Run]


@dataclass(frozen=True)
class Rollout:
    name: str
    description: str
    null: bool
    draws: Callable[[np.random.Generator], Draw]  # a canary's own generator (its cases...)
    lead: float = 0.0  # seconds of production runs before the canary's first run
    production: float = 1.0  # production's runs per candidate run (4: the canary has 20 %)


def fixed(shape: Shape, candidate: Shape | None = None) -> Callable[[np.random.Generator], Draw]:
    def make(rng: np.random.Generator) -> Draw:
        return lambda r, t, side: draw(r, candidate if side and candidate else shape)

    return make


def cases(rng: np.random.Generator) -> Draw:
    """Both versions run the same 30 cases, each with its own tool mix, pace and pass rate."""
    shapes = [
        Shape(
            shares=rng.dirichlet(SHARES * 4),
            latency_scale=float(rng.lognormal(0.0, 0.5)),
            pass_rates=tuple(min(0.999, r * rng.uniform(0.9, 1.05)) for r in PASS_RATES),
            case=f"case-{index:03d}",
        )
        for index in range(30)
    ]
    return lambda r, t, side: draw(r, shapes[int(r.integers(len(shapes)))])


def diurnal(rng: np.random.Generator) -> Draw:
    """Both versions slow down by half over the 6 hours and their pass rate sags at mid-life:
    the day's traffic, not a version."""

    def make(r: np.random.Generator, t: float, side: int) -> Run:
        hours = t / 3600.0
        sag = 0.04 * np.sin(np.pi * min(hours / 6.0, 1.0))
        rates = (PASS_RATES[0] - sag, PASS_RATES[1] - sag)
        return draw(r, Shape(latency_scale=1.0 + hours / 12.0, pass_rates=rates))

    return make


def ramp(rng: np.random.Generator) -> Draw:
    """Latency doubles over the hour for both versions; the canary starts 20 minutes in."""

    def make(r: np.random.Generator, t: float, side: int) -> Run:
        return draw(r, Shape(latency_scale=1.0 + (t + 1200.0) / 3600.0))

    return make


ROLLOUTS = (
    Rollout("independent", "independent calls, lognormal latency", True, fixed(Shape())),
    Rollout("clustered", "1 run in 5 repeats a tool 8 times", True, fixed(Shape(repeat=0.2))),
    Rollout("repeated_cases", "30 cases run again and again by both", True, cases),
    Rollout("heavy_tailed", "Pareto(1.2) latency", True, fixed(Shape(heavy_tail=True))),
    Rollout("diurnal", "latency +50 % over 6 h, pass rates sag", True, diurnal),
    Rollout("ramp_mid_window", "latency x2 over the hour, canary 20 min in", True, ramp, 1200.0),
    Rollout("new_tool", "new tool in 30 % of runs", False, fixed(Shape(), Shape(new_tool=0.3))),
    Rollout("latency_x1.5", "+50 % latency", False, fixed(Shape(), Shape(latency_scale=1.5))),
    Rollout(
        "approval_pass_80",
        "one rule passes 80 % not 97 %",
        False,
        fixed(Shape(), Shape(pass_rates=(0.8, PASS_RATES[1]))),
    ),
    Rollout(
        "approval_80_at_20",
        "the same, the canary taking 20 % of the traffic",
        False,
        fixed(Shape(), Shape(pass_rates=(0.8, PASS_RATES[1]))),
        production=4.0,
    ),
)


@dataclass(frozen=True)
class Lifetime:
    rollout: Rollout
    rule: str  # the variant's name
    canaries: int
    fired: Rate  # canaries rolled back at some look over the whole life
    by_runs: Rate  # ... by the first look where each side had `runs_mark` runs
    runs_mark: int
    delays: list[float]  # minutes from the canary's first run to its first ROLLBACK
    by_metric: dict[str, int]  # the metric of the first failing test, per fired canary

    @property
    def median_delay(self) -> float | None:
        return float(np.median(self.delays)) if self.delays else None


def simulate(
    rollouts: tuple[Rollout, ...],
    canaries: int,
    rules: dict[str, DriftRule],
    hours: float = 6.0,
    rate: float = 60.0,
    runs_mark: int = 120,
    seed: int = 1,
) -> Iterator[Lifetime]:
    """Per rollout and rule variant, `canaries` canaries living `hours` with `rate` runs an
    hour on each side, looked at every `rule.interval`. The variants judge the same runs."""
    for index, rollout in enumerate(rollouts):
        rng = np.random.default_rng([seed, index])
        found: dict[str, list[tuple[float, str, bool] | None]] = {name: [] for name in rules}
        for first in range(0, canaries, CHUNK):
            chunk = range(first, min(first + CHUNK, canaries))
            for lived in lives(rng, rollout, chunk, rules, hours, rate, runs_mark):
                for name, first_fired in lived.items():
                    found[name].append(first_fired)
        for name, outcomes in found.items():
            fired: list[tuple[float, str, bool]] = [f for f in outcomes if f is not None]
            metrics: dict[str, int] = {}
            for _, metric, _ in fired:
                metrics[metric] = metrics.get(metric, 0) + 1
            yield Lifetime(
                rollout,
                name,
                canaries,
                Rate(len(fired), canaries),
                Rate(sum(early for _, _, early in fired), canaries),
                runs_mark,
                [minutes for minutes, _, _ in fired],
                metrics,
            )


def lives(
    rng: np.random.Generator,
    rollout: Rollout,
    chunk: range,
    rules: dict[str, DriftRule],
    hours: float,
    rate: float,
    runs_mark: int,
) -> Iterator[dict[str, tuple[float, str, bool] | None]]:
    """Per canary of the chunk and rule variant: (minutes to its first ROLLBACK, the metric,
    whether it came by the first look at which each side had `runs_mark` runs), or None when it
    lived without one. The variants must share their sides (same compare, interval,
    min_samples and horizon)."""
    shared = next(iter(rules.values()))
    with tempfile.TemporaryDirectory() as tmp:
        database = Database(Path(tmp) / "rollouts.duckdb", "1GB")
        database.open()
        try:
            fill(database, rng, rollout, chunk, hours, rate)
            cursor = database.cursor()
            end = START + timedelta(hours=hours)
            for canary in chunk:
                target = Target(f"canary-{canary:04d}", "support-agent", "2.0.0")
                since = sequential.canary_start(cursor, Side(*exactly(target), end=end))
                pair = sides(shared, target, end, since)
                assert pair is not None
                life = sequential.load(cursor, *pair)
                (b_sql, b_params), (c_sql, c_params) = pair[0].sql(), pair[1].sql()
                closes = cursor.execute(
                    f"WITH b AS ({b_sql}), c AS ({c_sql}),"
                    " runs AS (SELECT * FROM b UNION ALL SELECT * FROM c)"
                    f" SELECT {sequential.CLOSED} FROM runs ORDER BY {sequential.CLOSING_ORDER}",
                    [*b_params, *c_params],
                ).fetchall()
                tests = dict(life.trajectories(shared.horizon))
                yield {
                    name: first_rollback(
                        life, tests, [c[0] for c in closes], rule, hours, runs_mark
                    )
                    for name, rule in rules.items()
                }
            cursor.close()
        finally:
            database.close()


def first_rollback(
    life: sequential.Life,
    tests: dict[str, np.ndarray],
    closes: list[datetime],
    rule: DriftRule,
    hours: float,
    runs_mark: int,
) -> tuple[float, str, bool] | None:
    """Replays the looks: the first one where a test's adjusted anytime p is under alpha."""
    weights = sequential.family(rule, {name: 1.0 for name in tests})
    names = sorted(weights)
    times = np.array(closes, dtype="datetime64[us]")
    candidate = np.cumsum(life.sides)
    baseline = np.cumsum(1 - life.sides)
    step = np.timedelta64(int(rule.interval * 1e6), "us")
    look = np.datetime64(START, "us") + step
    stop = np.datetime64(START + timedelta(hours=hours), "us")
    marked = False  # a look has seen `runs_mark` runs of each side
    while look <= stop:
        seen = int(np.searchsorted(times, look, side="left"))
        early = not marked
        if seen and min(candidate[seen - 1], baseline[seen - 1]) >= rule.min_samples:
            p = [float(np.exp(-tests[t][seen - 1])) for t in names]
            adjusted = stats.weighted_holm(p, [weights[t] for t in names])
            failing = [t for t, a in zip(names, adjusted, strict=True) if a < rule.alpha]
            if failing:
                minutes = float((look - np.datetime64(START, "us")) / np.timedelta64(60, "s"))
                return minutes, failing[0].split(":")[0], early
        if seen and min(candidate[seen - 1], baseline[seen - 1]) >= runs_mark:
            marked = True
        look += step
    return None


def fill(
    database: Database,
    rng: np.random.Generator,
    rollout: Rollout,
    canaries: range,
    hours: float,
    rate: float,
) -> None:
    """Every canary's runs: a Poisson stream a side (production's `production` times as
    dense), the candidate's from START, production's from `lead` seconds before it; each run
    closes 5 s after it ends."""
    rows: dict[str, list[dict[str, object]]] = {"trajectories": [], "steps": [], "results": []}
    life = hours * 3600.0
    for canary in canaries:
        make = rollout.draws(rng)
        sides = ((0, "1.0.0", -rollout.lead, rollout.production), (1, "2.0.0", 0.0, 1.0))
        for side, version, begin, share in sides:
            count = int(rng.poisson(rate * share * (life - begin) / 3600.0))
            for t in np.sort(rng.uniform(begin, life, count)):
                ended = START + timedelta(seconds=float(t))
                add_run(rows, rng, f"canary-{canary:04d}", version, make(rng, float(t), side))
                rows["trajectories"][-1]["end_time"] = ended
                rows["trajectories"][-1]["closed_at"] = ended + timedelta(seconds=5)
    con = database.connection
    for table, table_rows in rows.items():
        con.register("new_rows", pa.Table.from_pylist(table_rows))
        con.execute(f"INSERT INTO {table} BY NAME SELECT * FROM new_rows")
        con.unregister("new_rows")
    con.execute("CHECKPOINT")


__all__ = ["ROLLOUTS", "RULES", "Lifetime", "Rollout", "canary_rule", "simulate"]
