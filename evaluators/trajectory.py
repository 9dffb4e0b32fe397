"""trajectory: the expected steps, in strict order, in order with gaps, or in any order."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from evaluators.base import Finding, Verdict
from evaluators.matchers import StepMatcher
from evaluators.model import Step, Trajectory
from evaluators.rules import RuleBase


class TrajectoryRule(RuleBase):
    type: Literal["trajectory"]
    expected: list[StepMatcher] = Field(min_length=1, description="The expected steps, in order.")
    order: Literal["strict", "in_order", "any_order"] = Field(
        "in_order",
        description="strict: contiguous among steps of the expected kinds; in_order: with gaps;"
        " any_order: all present.",
    )
    min_match_rate: float = Field(1.0, ge=0, le=1, description="Pass at this fraction matched.")


def in_order(steps: list[Step], expected: list[StepMatcher]) -> list[Step]:
    """The most expected steps found in order, gaps allowed (a longest common subsequence), so
    one missing step costs only itself in the match rate."""
    hits = [[m.matches(s) for s in steps] for m in expected]
    n, k = len(expected), len(steps)
    best = [[0] * (k + 1) for _ in range(n + 1)]
    for i in range(n - 1, -1, -1):
        for j in range(k - 1, -1, -1):
            take = best[i + 1][j + 1] + 1 if hits[i][j] else 0
            best[i][j] = max(take, best[i + 1][j], best[i][j + 1])
    matched: list[Step] = []
    i = j = 0
    while i < n and j < k:
        if hits[i][j] and best[i][j] == best[i + 1][j + 1] + 1:
            matched.append(steps[j])
            i, j = i + 1, j + 1
        elif best[i + 1][j] >= best[i][j + 1]:
            i += 1
        else:
            j += 1
    return matched


def strict(steps: list[Step], expected: list[StepMatcher]) -> list[Step]:
    """The longest contiguous run matching the expected sequence from its start."""
    kinds = {k for m in expected for k in ([m.kind] if isinstance(m.kind, str) else m.kind or [])}
    if any(m.kind is None for m in expected):
        kinds = set()  # a matcher of any kind: every step counts
    among = [s for s in steps if not kinds or s.kind in kinds or s.span_kind in kinds]
    best: list[Step] = []
    for start in range(len(among)):
        run: list[Step] = []
        for offset, matcher in enumerate(expected):
            if start + offset >= len(among) or not matcher.matches(among[start + offset]):
                break
            run.append(among[start + offset])
        if len(run) > len(best):
            best = run
    return best


def any_order(steps: list[Step], expected: list[StepMatcher]) -> list[Step]:
    """The most expected steps matched to distinct steps (bipartite matching), so a broad
    matcher never takes the only step a narrower one could use."""
    candidates = [[j for j, s in enumerate(steps) if m.matches(s)] for m in expected]
    owner: dict[int, int] = {}  # step index -> expected index

    def assign(i: int, seen: set[int]) -> bool:
        for j in candidates[i]:
            if j in seen:
                continue
            seen.add(j)
            if j not in owner or assign(owner[j], seen):
                owner[j] = i
                return True
        return False

    for i in range(len(expected)):
        assign(i, set())
    return [steps[j] for j in sorted(owner)]


STRATEGIES = {"strict": strict, "in_order": in_order, "any_order": any_order}


def evaluate_trajectory(t: Trajectory, rule: TrajectoryRule) -> Finding:
    matched = STRATEGIES[rule.order](t.steps, rule.expected)
    rate = len(matched) / len(rule.expected)
    evidence = tuple(s.span_id for s in matched)
    summary = f"{len(matched)} of {len(rule.expected)} expected steps ({rule.order}), match rate"
    if rate + 1e-9 >= rule.min_match_rate:
        return Finding(Verdict.PASS, f"{summary} {rate:.2f}", evidence, rate)
    found = {id(s) for s in matched}
    missing = next(
        (m for m in rule.expected if not any(m.matches(s) for s in t.steps if id(s) in found)),
        None,
    )
    hint = f"; first missing: {missing.describe()}" if missing else ""
    return Finding(
        Verdict.FAIL,
        f"{summary} {rate:.2f} below {rule.min_match_rate:.2f}{hint}",
        evidence,
        rate,
    )
