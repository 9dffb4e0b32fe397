"""Session rules: checks over a conversation of many runs (turns), not over one run.

A session is the runs of one service's conversation (`gen_ai.conversation.id`, OpenInference
`session.id`, OpenLLMetry association properties, or a configured attribute) in the order they
arrived, on the session's clock (collector/sessions/turns.py). Its rules see every turn so far
that the pack selects, each read by the pack's approval recogniser:
- `budget` with `scope: session`: the run budgets summed over the session, plus `max_turns`;
- `approval_lifetime`: an approval covers writes for at most `max_age` and `max_turns` turns,
  and only for the same resource (`same_resource`, or `same_subject` bindings of the approval's
  arguments or result, evaluators/authorization.py); with `causal`, an approval in the write's
  own turn covers it only when the model call that asked for the write started after the
  approval's result. A write without a covering approval fails, with the write's and the last
  approval's traces as evidence; a subject or a requester that cannot be read is a review;
- `repeated_failures`: a tool failing in `min_turns` turns (in a row with `consecutive`).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Literal

from pydantic import Field, model_validator

from evaluators.authorization import (
    CAUSAL_UNKNOWN,
    SUBJECT_UNKNOWN,
    SubjectBinding,
    check_subject,
    decided_after,
    requester,
    unknown_requester,
)
from evaluators.base import Finding, Verdict
from evaluators.budget import BudgetRule, evaluate_budget
from evaluators.durations import duration_text
from evaluators.matchers import MISSING, StepMatcher, at_path
from evaluators.model import CLOCK_SLACK_NS, Step, Trajectory
from evaluators.rules import REASON_PATTERN, RuleBase, no_when
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
    same_subject: list[SubjectBinding] = Field(
        default_factory=list,
        description="An approval covers a write only when it names the write's subject: each"
        " binding ties a JSON path of the approval's arguments or result to one of the write's"
        " arguments. A mismatch fails with `subject_reason`; an approval whose subject cannot be"
        " read is a review (approval_subject_unknown).",
    )
    subject_reason: str = Field(
        "wrong_authorization_context",
        pattern=REASON_PATTERN,
        description="Reason code when the approvals in reach are for another subject.",
    )
    causal: bool = Field(
        False,
        description="An approval in the write's own turn covers it only when the model call that"
        " asked for the write started after the approval's result (a write asked for in the same"
        " model turn as its approval was decided before the answer).",
    )
    causal_reason: str = Field(
        "decided_before_approval",
        pattern=REASON_PATTERN,
        description="Reason code when the write was decided before the approval's result.",
    )

    @model_validator(mode="after")
    def _bounded(self) -> ApprovalLifetimeRule:
        if (
            self.max_age is None
            and self.max_turns is None
            and not self.same_resource
            and not self.same_subject
            and not self.causal
        ):
            raise ValueError(
                "set max_age, max_turns, same_resource, same_subject or causal"
                " (else use `precedes`)"
            )
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


def before(
    approvals: list[tuple[int, Step]], write: Step, turn: int, causal: bool
) -> list[tuple[int, Step]]:
    """The approvals that ended before the write began (within the clocks' slack); with
    `causal`, every approval of the write's own turn, which `uncovered` then orders by cause."""
    start = write.start_time_unix_nano + CLOCK_SLACK_NS
    return [(i, a) for i, a in approvals if a.end_time_unix_nano <= start or (causal and i == turn)]


@dataclass(frozen=True)
class Uncovered:
    """Why no approval covers a write: the message, the reason code (None: the rule's own),
    whether it is a review (cannot tell) rather than a failure, and the approval to show."""

    why: str
    reason: str | None = None
    review: bool = False
    approval: Step | None = None


def decided_before(
    rule: ApprovalLifetimeRule, a: Step, i: int, write: Step, asked_by: Step | None
) -> Uncovered | None:
    """Why an approval of the write's own turn was not there when the write was decided (None
    when it was): it ended after the write began, or after the model call that asked for the
    write started; a review when that model call is not recorded."""
    if a.end_time_unix_nano > write.start_time_unix_nano + CLOCK_SLACK_NS:
        return Uncovered(
            f"{write.name} began before the approval in turn {i + 1} had its result",
            rule.causal_reason,
            approval=a,
        )
    if asked_by is None:
        return Uncovered(unknown_requester(write), CAUSAL_UNKNOWN, True, a)
    if not decided_after(a, asked_by):
        return Uncovered(
            f"{write.name} was asked for by {asked_by.name} (seq {asked_by.seq}),"
            f" which started before the approval in turn {i + 1} had its result",
            rule.causal_reason,
            approval=a,
        )
    return None


def uncovered(
    rule: ApprovalLifetimeRule,
    earlier: list[tuple[int, Step]],
    turn: int,
    write: Step,
    asked_by: Step | None,
) -> Uncovered | None:
    """Why none of the approvals before it covers the write (None when one does).

    Age and turn limits are checked first; of the approvals they leave, a subject that cannot
    be read or a requester that is not recorded makes a review, a subject or an order that is
    wrong a failure with its own reason."""
    if not earlier:
        return Uncovered("no approval before it")
    wanted = resource(write, rule.same_resource)
    why: list[Uncovered] = []
    for i, a in reversed(earlier):
        if rule.max_turns is not None and turn - i >= rule.max_turns:
            why.append(Uncovered(f"approval in turn {i + 1} is {turn - i} turn(s) old"))
            continue
        age = (write.start_time_unix_nano - a.end_time_unix_nano) / 1e9
        if rule.max_age is not None and age > rule.max_age:
            limit = duration_text(rule.max_age)
            why.append(Uncovered(f"approval in turn {i + 1} is {age:.0f}s old (> {limit})"))
            continue
        if rule.same_resource and (wanted is None or resource(a, rule.same_resource) != wanted):
            why.append(Uncovered(f"approval in turn {i + 1} is for another resource"))
            continue
        if rule.causal and i == turn:
            out_of_order = decided_before(rule, a, i, write, asked_by)
            if out_of_order is not None:
                why.append(out_of_order)
                continue
        if rule.same_subject:
            check = check_subject(a, write, rule.same_subject)
            if check.matches is None:
                why.append(Uncovered(f"cannot tell: {check.detail}", SUBJECT_UNKNOWN, True, a))
                continue
            if not check.matches:
                why.append(Uncovered(check.detail, rule.subject_reason, approval=a))
                continue
        return None
    reviews = [w for w in why if w.review]
    return reviews[0] if reviews else why[0]


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
    review: Finding | None = None
    for turn, write in writes:
        earlier = before(approvals, write, turn, rule.causal)
        why = uncovered(rule, earlier, turn, write, requester(session.turns[turn], write))
        if why is None:
            continue
        shown = why.approval or (earlier[-1][1] if earlier else None)
        spans = session.trace_of()
        evidence = (write.span_id,) if shown is None else (shown.span_id, write.span_id)
        traces = tuple(dict.fromkeys(spans[s] for s in evidence))
        message = f"{write.name} in turn {turn + 1} is not covered by an approval: {why.why}"
        if why.review:
            review = review or Finding(
                Verdict.REVIEW, message, evidence, reason=why.reason, traces=traces
            )
            continue
        return Finding(Verdict.FAIL, message, evidence, reason=why.reason, traces=traces)
    if review is not None:
        return review
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
