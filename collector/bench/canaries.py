"""Simulated canaries for the drift calibration: runs of a production version and a candidate.

Each scenario draws both sides of one canary. Under a null scenario both sides come from the same
generator, so every failing drift rule is a false ROLLBACK; under a shift the candidate differs in
one known way, so a failing rule is a detection. The generators are built to break tests that
assume more independence than agent runs have: tool calls clustered within runs, repeated
attempts of the same cases, heavy-tailed latency.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

TOOLS = ("search", "fetch", "summarise", "answer", "escalate")
SHARES = np.array([0.35, 0.25, 0.2, 0.15, 0.05])
NEW_TOOL = "lookup_v2"
RULES = ("support/approval-before-write", "support/budget")
PASS_RATES = (0.97, 0.92)


@dataclass(frozen=True)
class Run:
    tools: tuple[str, ...]
    duration_ms: float
    input_tokens: int
    output_tokens: int
    cost_usd: float
    error: bool
    passes: tuple[bool, ...]
    case: str | None = None


@dataclass(frozen=True)
class Shape:
    """How one side's runs are drawn: the knobs the scenarios turn."""

    shares: np.ndarray = field(default_factory=lambda: SHARES)
    repeat: float = 0.0  # share of runs that repeat one tool eight times
    new_tool: float = 0.0  # share of runs that also call NEW_TOOL
    latency_scale: float = 1.0
    heavy_tail: bool = False
    pass_rates: tuple[float, ...] = PASS_RATES
    case: str | None = None


def draw(rng: np.random.Generator, shape: Shape) -> Run:
    calls = 1 + int(rng.poisson(1.5))
    tools = [str(t) for t in rng.choice(TOOLS, size=calls, p=shape.shares)]
    if rng.random() < shape.repeat:
        tools = [tools[0]] * 8
    if rng.random() < shape.new_tool:
        tools.insert(int(rng.integers(len(tools) + 1)), NEW_TOOL)
    # Pareto(1.2) has infinite variance; the lognormal is the usual shape of agent latency.
    heavy = 600.0 * (1.0 + rng.pareto(1.2))
    base = heavy if shape.heavy_tail else 900.0 * rng.lognormal(0.0, 0.3)
    duration = (base + 150.0 * len(tools)) * shape.latency_scale
    input_tokens = 400 + 250 * len(tools) + int(rng.poisson(60))
    output_tokens = 80 + int(rng.poisson(40))
    return Run(
        tools=tuple(tools),
        duration_ms=duration,
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        cost_usd=input_tokens * 2.5e-6 + output_tokens * 1e-5,
        error=bool(rng.random() < 0.04),
        passes=tuple(bool(rng.random() < rate) for rate in shape.pass_rates),
        case=shape.case,
    )


def sample(rng: np.random.Generator, shape: Shape, runs: int) -> list[Run]:
    return [draw(rng, shape) for _ in range(runs)]


Sides = tuple[list[Run], list[Run]]


def independent(rng: np.random.Generator, runs: int) -> Sides:
    return sample(rng, Shape(), runs), sample(rng, Shape(), runs)


def clustered(rng: np.random.Generator, runs: int) -> Sides:
    """One run in five repeats a tool eight times (a retry loop), on both sides."""
    shape = Shape(repeat=0.2)
    return sample(rng, shape, runs), sample(rng, shape, runs)


def heavy_tailed(rng: np.random.Generator, runs: int) -> Sides:
    shape = Shape(heavy_tail=True)
    return sample(rng, shape, runs), sample(rng, shape, runs)


def repeated_cases(rng: np.random.Generator, runs: int, attempts: int = 3) -> Sides:
    """Both versions run the same `runs / 2` cases, `attempts` times each; a case has its own
    tool mix, pace and difficulty, so its attempts are alike and unlike other cases."""
    cases = []
    for index in range(max(runs // 2, 1)):
        cases.append(
            Shape(
                shares=rng.dirichlet(SHARES * 4),
                latency_scale=float(rng.lognormal(0.0, 0.5)),
                pass_rates=tuple(min(0.999, r * rng.uniform(0.9, 1.05)) for r in PASS_RATES),
                case=f"case-{index:03d}",
            )
        )

    def side() -> list[Run]:
        return [draw(rng, case) for case in cases for _ in range(attempts)]

    return side(), side()


def new_tool(rng: np.random.Generator, runs: int) -> Sides:
    """The candidate also calls a tool production never calls, in 30 % of its runs."""
    return sample(rng, Shape(), runs), sample(rng, Shape(new_tool=0.3), runs)


def slower(rng: np.random.Generator, runs: int) -> Sides:
    """The candidate takes 50 % longer."""
    return sample(rng, Shape(), runs), sample(rng, Shape(latency_scale=1.5), runs)


def more_failures(rng: np.random.Generator, runs: int) -> Sides:
    """The candidate's approval rule passes 80 % of runs instead of 97 %."""
    worse = Shape(pass_rates=(0.8, PASS_RATES[1]))
    return sample(rng, Shape(), runs), sample(rng, worse, runs)


@dataclass(frozen=True)
class Scenario:
    name: str
    sides: Callable[[np.random.Generator, int], Sides]
    null: bool
    description: str
    expected: str | None = None  # the metric a shift should fail


SCENARIOS = (
    Scenario("independent", independent, True, "independent calls, lognormal latency"),
    Scenario("clustered", clustered, True, "1 run in 5 repeats a tool 8 times"),
    Scenario("repeated_cases", repeated_cases, True, "runs/2 cases, 3 attempts each"),
    Scenario("heavy_tailed", heavy_tailed, True, "Pareto(1.2) latency, infinite variance"),
    Scenario("new_tool", new_tool, False, "new tool in 30 % of runs", "tool_choice"),
    Scenario("latency_x1.5", slower, False, "+50 % latency", "latency"),
    Scenario(
        "approval_pass_80", more_failures, False, "one rule passes 80 % not 97 %", "pass_rate"
    ),
)
