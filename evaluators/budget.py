"""budget: steps, calls, tokens, cost, time, and repeated calls (loops, redundancy)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from typing import Literal

import orjson
from pydantic import Field, model_validator

from evaluators.base import Finding, Verdict
from evaluators.model import Step, Trajectory
from evaluators.rules import RuleBase, no_when


class BudgetRule(RuleBase):
    type: Literal["budget"]
    scope: Literal["trajectory", "session"] = Field(
        "trajectory", description="trajectory: each run; session: summed over its turns."
    )
    max_turns: int | None = Field(None, ge=1, description="Turns of a session (session scope).")
    max_steps: int | None = Field(None, ge=0)
    max_tool_calls: int | None = Field(None, ge=0)
    max_llm_calls: int | None = Field(None, ge=0)
    max_tokens: int | None = Field(None, ge=0, description="Input + output tokens of model calls.")
    max_cost_usd: float | None = Field(None, ge=0)
    max_duration_ms: float | None = Field(None, ge=0)
    max_same_call: int | None = Field(
        None, ge=1, description="Calls of one tool with the same arguments anywhere in the run."
    )
    max_consecutive_same_call: int | None = Field(
        None,
        ge=1,
        description="Calls of one tool with the same arguments back to back among the run's"
        " tool calls (a loop).",
    )
    max_same_tool: int | None = Field(None, ge=1, description="Calls of one tool at all.")

    @model_validator(mode="after")
    def _something(self) -> BudgetRule:
        limits = self.model_dump(
            include={f for f in type(self).model_fields if f.startswith("max")}
        )
        if all(v is None for v in limits.values()):
            raise ValueError("set at least one max_* limit")
        if self.max_turns is not None and self.scope != "session":
            raise ValueError("max_turns counts a session's runs: it needs `scope: session`")
        if self.scope == "session":
            no_when(self)
        return self


def repeated(steps: list[Step], keys: list[object]) -> list[list[Step]]:
    """Steps grouped by their key (`keys[i]` is `steps[i]`'s) wherever they occur in the run."""
    groups: dict[object, list[Step]] = defaultdict(list)
    for step, key in zip(steps, keys, strict=True):
        groups[key].append(step)
    return list(groups.values())


def runs_of(steps: list[Step], keys: list[object]) -> list[list[Step]]:
    """Steps grouped by key only while they follow each other: A A B A is [A A], [B], [A]."""
    runs: list[list[Step]] = []
    for i, step in enumerate(steps):
        if runs and keys[i - 1] == keys[i]:
            runs[-1].append(step)
        else:
            runs.append([step])
    return runs


def same_call(step: Step) -> object:
    return step.tool_name, orjson.dumps(step.arguments, option=orjson.OPT_SORT_KEYS)


def repeat_checks(rule: BudgetRule, steps: list[Step]) -> list[tuple[int, list[list[Step]], str]]:
    """(limit, groups of tool calls, what the calls share) of each repeat limit the rule sets;
    a call's arguments are serialized once, however many limits compare them."""
    checks: list[tuple[int, list[list[Step]], str]] = []
    limits = (rule.max_same_call, rule.max_consecutive_same_call, rule.max_same_tool)
    if all(limit is None for limit in limits):
        return checks  # a rule of totals alone: no pass over the calls
    tools = [s for s in steps if s.is_tool_call]
    if rule.max_same_call is not None or rule.max_consecutive_same_call is not None:
        calls = [same_call(s) for s in tools]
        if rule.max_same_call is not None:
            checks.append((rule.max_same_call, repeated(tools, calls), "with the same arguments"))
        if rule.max_consecutive_same_call is not None:
            label = "in a row with the same arguments"
            checks.append((rule.max_consecutive_same_call, runs_of(tools, calls), label))
    if rule.max_same_tool is not None:
        names: list[object] = [s.tool_name for s in tools]
        checks.append((rule.max_same_tool, repeated(tools, names), "in total"))
    return checks


def evaluate_budget(t: Trajectory, rule: BudgetRule) -> Finding:
    over: list[str] = []
    evidence: list[str] = []
    totals: tuple[tuple[str, float | None, Callable[[], float | None]], ...] = (
        ("steps", rule.max_steps, lambda: len(t.steps)),
        ("tool calls", rule.max_tool_calls, lambda: t.tool_calls),
        ("LLM calls", rule.max_llm_calls, lambda: t.llm_calls),
        ("tokens", rule.max_tokens, lambda: t.input_tokens + t.output_tokens),
        ("cost USD", rule.max_cost_usd, lambda: t.cost_usd),
        ("duration ms", rule.max_duration_ms, lambda: t.duration_ms),
    )
    for name, limit, value_of in totals:
        value = value_of() if limit is not None else None  # only the totals the rule limits
        if limit is not None and value is not None and value > limit:
            over.append(f"{name} {value:g} > {limit:g}")
    for limit, groups, label in repeat_checks(rule, t.steps):
        for group in groups:
            if len(group) > limit:
                over.append(f"{group[0].tool_name} called {len(group)} times {label} (> {limit})")
                evidence.extend(s.span_id for s in group)
    if over:
        # Two limits may name the same calls (a loop is also a repeat): each span once.
        return Finding(
            Verdict.FAIL, "over budget: " + "; ".join(over), tuple(dict.fromkeys(evidence))
        )
    if rule.max_cost_usd is not None and t.unpriced_llm_calls:
        return Finding(
            Verdict.REVIEW,
            f"cost unknown for {t.unpriced_llm_calls} model call(s) without a price;"
            f" the priced ones cost {t.cost_usd or 0:g} USD",
            reason="cost_unknown",
        )
    return Finding(Verdict.PASS, "within budget")
