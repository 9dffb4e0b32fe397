"""Session rules: checks over a conversation of many runs (turns), not over one run.

A session is the runs of one service's conversation (`gen_ai.conversation.id`, OpenInference
`session.id`, OpenLLMetry association properties, or a configured attribute) in the order they
arrived, on the session's clock (collector/sessions/turns.py). Its rules see every turn so far
that the pack selects, each read by the pack's approval recogniser:
- `budget` with `scope: session`: the run budgets summed over the session, plus `max_turns`;
- `approval_lifetime`: an approval covers writes for at most `max_age` and `max_turns` turns,
  and only for the same resource; a write without a covering approval fails, with the write's
  and the last approval's traces as evidence;
- `repeated_failures`: a tool failing in `min_turns` turns (in a row with `consecutive`).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Literal

from pydantic import Field, model_validator

from evaluators.base import Finding, Verdict
from evaluators.budget import BudgetRule, evaluate_budget
from evaluators.durations import duration_text
from evaluators.matchers import MISSING, StepMatcher, at_path
from evaluators.model import CLOCK_SLACK_NS, Step, Trajectory
from evaluators.rules import RuleBase, no_when
from evaluators.window import Seconds


@dataclass
class Session:
    """One conversation's turns so far, in the order they arrived (on the session's clock)."""

    session_id: str
    turns: list[Trajectory] = field(default_factory=list)

    def trace_of(self) -> dict[str, str]:
        """span id -> the trace (turn) it belongs to."""
        return {s.span_id: t.trace_id for t in self.turns for s in t.steps}

    def merged(self) -> Trajectory:
        """The turns as one run (steps in turn order, first start to last end): what the run
        budgets add up over."""
        first, last = self.turns[0], self.turns[-1]
        return replace(
            last,
            trace_id=self.session_id,
            steps=[s for t in self.turns for s in t.steps],
            start_time_unix_nano=min(t.start_time_unix_nano for t in self.turns),
            end_time_unix_nano=max(t.end_time_unix_nano for t in self.turns),
            input=first.input,
        )


class SessionRule(RuleBase):
    scope: Literal["session"] = Field(
        "session", description="Session rules see every turn of a conversation."
    )

    @model_validator(mode="after")
    def _no_when(self) -> SessionRule:
        no_when(self)
        return self


class ApprovalLifetimeRule(SessionRule):
    type: Literal["approval_lifetime"]
    writes: StepMatcher = Field(description="The writes an approval must cover.")
    approval: StepMatcher | None = Field(
        None, description="Which approvals count (default: any approval step granted)."
    )
    max_age: Seconds | None = Field(
        None, description="An approval covers writes starting at most this long after it."
    )
    max_turns: int | None = Field(
        None, ge=1, description="...and in at most this many turns: 1 is its own turn only."
    )
    same_resource: list[str] = Field(
        default_factory=list,
        description="JSON paths into the arguments that must be equal in the approval and the"
        " write (e.g. $.customer_id); a write lacking one is not covered.",
    )

    @model_validator(mode="after")
    def _bounded(self) -> ApprovalLifetimeRule:
        if self.max_age is None and self.max_turns is None and not self.same_resource:
            raise ValueError("set max_age, max_turns or same_resource (else use `precedes`)")
        return self


class RepeatedFailuresRule(SessionRule):
    type: Literal["repeated_failures"]
    steps: StepMatcher = Field(
        default_factory=lambda: StepMatcher(kind="tool"),
        description="Which steps count (default: tool calls); grouped by tool name.",
    )
    min_turns: int = Field(2, ge=2, description="Failing in this many turns fails the session.")
    consecutive: bool = Field(False, description="Only turns in a row count.")


def is_session_rule(rule: Any) -> bool:
    return getattr(rule, "scope", "trajectory") == "session"


def evaluate_session_budget(session: Session, rule: BudgetRule) -> Finding:
    """A breach is named by the turn that went over and the steps that did, not by the latest
    turn: a session stays over budget, and every later turn must find the same failure."""
    turns = session.turns
    if rule.max_turns is not None and len(turns) > rule.max_turns:
        over = turns[rule.max_turns]
        return Finding(
            Verdict.FAIL,
            f"over budget: turns {len(turns)} > {rule.max_turns}",
            (over.root_span_id,) if over.root_span_id else (),
            traces=(over.trace_id,),
        )
    found = evaluate_budget(session.merged(), rule)
    if found.verdict != Verdict.FAIL:
        return found
    first = Session(session.session_id, turns[: first_over(session, rule)])
    found = evaluate_budget(first.merged(), rule)
    spans = first.trace_of()
    traces = tuple(dict.fromkeys(spans[s] for s in found.evidence if s in spans))
    # Totals have no steps to point at: the turn that went over.
    return replace(found, traces=traces or (first.turns[-1].trace_id,))


def first_over(session: Session, rule: BudgetRule) -> int:
    """How many turns it took to go over (the whole session is over): every limit only grows
    with turns, so a bisection finds it."""
    low, high = 1, len(session.turns)
    while low < high:
        middle = (low + high) // 2
        prefix = Session(session.session_id, session.turns[:middle])
        if evaluate_budget(prefix.merged(), rule).verdict == Verdict.FAIL:
            high = middle
        else:
            low = middle + 1
    return high


def granted(rule: ApprovalLifetimeRule, step: Step) -> bool:
    if rule.approval is not None:
        return rule.approval.matches(step) and step.approval_status != "denied"
    return step.kind == "approval" and step.approval_status == "approved"


def resource(step: Step, paths: list[str]) -> tuple[Any, ...] | None:
    """The write's or approval's resource: its arguments at `paths`; None when one is missing."""
    values = tuple(at_path(step.arguments, p) for p in paths)
    return None if any(v is MISSING for v in values) else values


def before(approvals: list[tuple[int, Step]], write: Step) -> list[tuple[int, Step]]:
    """The approvals that ended before the write began (within the clocks' slack)."""
    start = write.start_time_unix_nano + CLOCK_SLACK_NS
    return [(i, a) for i, a in approvals if a.end_time_unix_nano <= start]


def uncovered_reason(
    rule: ApprovalLifetimeRule, earlier: list[tuple[int, Step]], turn: int, write: Step
) -> str | None:
    """Why none of the approvals before it covers the write (None when one does)."""
    if not earlier:
        return "no approval before it"
    wanted = resource(write, rule.same_resource)
    why = []
    for i, a in reversed(earlier):
        if rule.max_turns is not None and turn - i >= rule.max_turns:
            why.append(f"approval in turn {i + 1} is {turn - i} turn(s) old")
            continue
        age = (write.start_time_unix_nano - a.end_time_unix_nano) / 1e9
        if rule.max_age is not None and age > rule.max_age:
            limit = duration_text(rule.max_age)
            why.append(f"approval in turn {i + 1} is {age:.0f}s old (> {limit})")
            continue
        if rule.same_resource and (wanted is None or resource(a, rule.same_resource) != wanted):
            why.append(f"approval in turn {i + 1} is for another resource")
            continue
        return None
    return why[0]


def evaluate_approval_lifetime(session: Session, rule: ApprovalLifetimeRule) -> Finding:
    approvals: list[tuple[int, Step]] = []
    writes: list[tuple[int, Step]] = []
    for i, t in enumerate(session.turns):
        for s in t.steps:
            if granted(rule, s):
                approvals.append((i, s))
            elif rule.writes.matches(s):
                writes.append((i, s))
    if not writes:
        return Finding(Verdict.NOT_APPLICABLE, f"no {rule.writes.describe()} step")
    for turn, write in writes:
        earlier = before(approvals, write)
        why = uncovered_reason(rule, earlier, turn, write)
        if why is None:
            continue
        last = earlier[-1][1] if earlier else None
        spans = session.trace_of()
        evidence = (write.span_id,) if last is None else (last.span_id, write.span_id)
        traces = tuple(dict.fromkeys(spans[s] for s in evidence))
        return Finding(
            Verdict.FAIL,
            f"{write.name} in turn {turn + 1} is not covered by an approval: {why}",
            evidence,
            traces=traces,
        )
    return Finding(Verdict.PASS, f"{len(writes)} write(s), each covered by an approval")


def evaluate_repeated_failures(session: Session, rule: RepeatedFailuresRule) -> Finding:
    """The failure is the first tool to fail in `min_turns` turns, named by those turns only,
    so that later failing turns find the same failure rather than a new one."""
    failing: dict[str, list[tuple[int, Step]]] = {}
    for i, t in enumerate(session.turns):
        for s in t.steps:
            if s.status == "error" and rule.steps.matches(s):
                turns = failing.setdefault(s.tool_name or s.name, [])
                if not turns or turns[-1][0] != i:
                    turns.append((i, s))
    breaches = []
    for tool, turns in failing.items():
        run = first_run(turns, rule.min_turns) if rule.consecutive else turns[: rule.min_turns]
        if len(run) >= rule.min_turns:
            breaches.append((run[-1][0], tool, run))
    if breaches:
        _, tool, run = min(breaches, key=lambda b: b[0])
        where = ", ".join(str(i + 1) for i, _ in run)
        return Finding(
            Verdict.FAIL,
            f"{tool} failed in {len(run)} turns ({where})",
            tuple(s.span_id for _, s in run),
            traces=tuple(session.turns[i].trace_id for i, _ in run),
        )
    return Finding(Verdict.PASS, f"no step failed in {rule.min_turns} turns")


def first_run(turns: list[tuple[int, Step]], length: int) -> list[tuple[int, Step]]:
    """The first `length` failing turns in a row (fewer when no run is that long)."""
    current: list[tuple[int, Step]] = []
    for item in turns:
        current = [*current, item] if current and current[-1][0] == item[0] - 1 else [item]
        if len(current) == length:
            return current
    return []
