"""The guard's judgement, pure: the run so far plus the proposed call, under the packs that
select the target and the target's current decision.

The proposed call is built into the run as one more tool step (a span row like the stored
ones, under the guard's own span id), so every rule reads it exactly as it will read the call
if it runs. A rule's failure counts against the call only when the call is part of it: its
evidence names the call, or the run without the call passes the rule. A violation already in
the run is the verdict's business afterwards, not a reason to refuse this call.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

import orjson

from collector.assembler.build import build_trajectory
from collector.assembler.grow import GrownRun
from collector.assembler.prices import PriceTable
from collector.guard.call import GuardAnswer, GuardRequest
from collector.guard.conversation import Conversation
from collector.guard.per_pack import PerPack
from collector.guard.session_rules import conversation_verdicts
from collector.guard.verdicts import NO_VERDICT, Verdicts, counted, error_verdict
from evaluators.approvals import DEFAULT_APPROVALS, with_approvals
from evaluators.base import Decision, Finding
from evaluators.evaluate import selected, when_applies
from evaluators.flow import flow_step
from evaluators.guard import GUARD_RULE_TYPES, Answer, GuardSettings, strongest_answer
from evaluators.mcp import mcp_step
from evaluators.model import Step, Trajectory
from evaluators.precedes import precedes_step
from evaluators.registry import RULE_TYPES, Rule
from evaluators.rulepack import RulePack
from evaluators.sessions import is_session_rule

UNKNOWN = "guard_run_unknown"  # no span of this run (for this service) has arrived
PARTIAL = "guard_run_partial"  # the model call that asked for the call has not arrived
NO_PACK = "guard_no_pack"  # no pack in force selects the target


def proposed_row(request: GuardRequest, span_id: str, parent: str | None, now_ns: int) -> dict:
    """The proposed call as a stored span row would be: a tool span starting now."""
    tool = request.tool
    attributes: dict[str, Any] = {"sextant.guard.proposed": True}
    if tool.kind == "mcp":
        attributes["mcp.method.name"] = "tools/call"
    return {
        "trace_id": request.trace_id,
        "span_id": span_id,
        "parent_span_id": parent,
        "flags": 0,
        "name": tool.name,
        "kind": "INTERNAL",
        "scope_name": "sextant.guard",
        "start_time_unix_nano": now_ns,
        "end_time_unix_nano": now_ns,
        "status_code": "UNSET",
        "step_kind": "tool",
        "tool_name": tool.name,
        "tool_call_id": tool.tool_call_id,
        "tool_arguments": orjson.dumps(tool.arguments).decode(),
        "tool_result": None,
        "model": None,
        "input_tokens": None,
        "output_tokens": None,
        "agent_name": None,
        "conversation_id": None,
        "user_id": None,
        "error_type": None,
        "service_name": request.service,
        "service_version": request.version,
        "attributes": orjson.dumps(attributes).decode(),
        "events": None,
    }


def parent_of_call(
    request: GuardRequest, rows: list[dict[str, Any]], grown: GrownRun | None = None
) -> str | None:
    """The span the call runs under: as the agent said, else the open span the run's exported
    spans hang from (an ancestor that has not ended, so is not stored yet)."""
    if request.parent_span_id:
        return request.parent_span_id
    if grown is not None:
        return grown.dangling
    ids = {r["span_id"] for r in rows}
    dangling = [r["parent_span_id"] for r in rows if r["parent_span_id"] not in ids]
    return next((p for p in dangling if p), None)


def run_with_call(
    request: GuardRequest,
    rows: list[dict[str, Any]],
    span_id: str,
    now_ns: int,
    prices: PriceTable,
    grown: GrownRun | None = None,
) -> Trajectory:
    """The run so far with the proposed call as its latest step, as the target it claims;
    `grown`, the run of `rows` kept from earlier calls, spares building it whole."""
    parent = parent_of_call(request, rows, grown)
    row = proposed_row(request, span_id, parent, now_ns)
    t = grown.with_row(row) if grown is not None else None
    if t is None:
        t = build_trajectory(request.trace_id, [*rows, row], prices)
    t.agent_name = request.agent or t.agent_name
    t.service_version = request.version or t.service_version
    call = call_step(t, span_id)
    call.agent_name = call.agent_name or request.agent
    if request.tool.kind == "mcp":
        call.mcp = {"method": "tools/call", "server": request.tool.mcp_server}
    return t


def call_step(t: Trajectory, span_id: str) -> Step:
    """The proposed call's step: the run's last, unless the build placed it before others."""
    if t.steps and t.steps[-1].span_id == span_id:
        return t.steps[-1]
    return next(s for s in t.steps if s.span_id == span_id)


def without(t: Trajectory, span_id: str) -> Trajectory:
    return replace(t, steps=[s for s in t.steps if s.span_id != span_id])


# Rule types that judge each step on its own: the proposed call is asked its own verdict, since
# the run's finding names only the first failure (an earlier flow, a failing B whose reason is
# another, a refusal beside a review) and would hide the call's.
STEP_JUDGES: dict[str, Callable[[Trajectory, Any, Step], Finding | None]] = {
    "precedes": precedes_step,
    "flow": flow_step,
    "mcp": mcp_step,
}


def rule_verdict(t: Trajectory, rule: Rule, span_id: str) -> Verdicts | None:
    """deny / review when the rule's finding is about the proposed call; None when not."""
    evaluate = RULE_TYPES[rule.type].evaluate
    assert evaluate is not None  # GUARD_RULE_TYPES are all run rules
    judge_step = STEP_JUDGES.get(rule.type)
    try:
        if judge_step is not None:
            # without the call, it has no verdict of its own
            own = judge_step(t, rule, call_step(t, span_id))
            return None if own is None else counted(rule, own, span_id, lambda: NO_VERDICT)
        finding = evaluate(t, rule)
    except Exception as exc:
        return error_verdict(rule, exc, span_id)
    return counted(rule, finding, span_id, lambda: evaluate(without(t, span_id), rule))


# The pack's rules the guard asks: run rules that can decide before the run ends.
guard_rules = PerPack(
    lambda pack: [r for r in pack.rules if r.type in GUARD_RULE_TYPES and not is_session_rule(r)]
)


def pack_verdicts(
    t: Trajectory,
    pack: RulePack,
    span_id: str,
    error: Exception | None = None,
    read: dict[int, Trajectory] | None = None,
) -> list[Verdicts]:
    """Every rule of the pack that can decide now, about the proposed call; the pack selects
    the run (`error`: it could not tell). `read` keeps the run as each approval recogniser
    reads it, for the other packs of the call (most share the default one)."""
    if error is not None:
        message = f"{pack.name}: cannot tell whether the pack selects the run: {error}"
        return [Verdicts(Answer.REVIEW, "trace_incomplete", message, (span_id,))]
    approvals = pack.approvals or DEFAULT_APPROVALS
    read = {} if read is None else read
    if id(approvals) not in read:
        read[id(approvals)] = with_approvals(t, approvals)
    t = read[id(approvals)]
    out = []
    for rule in guard_rules(pack):
        try:
            if not when_applies(t, rule):
                continue
        except Exception:
            continue  # a `when` on the root span: the root has not ended yet, so not asked
        found = rule_verdict(t, rule, span_id)
        if found is not None:
            out.append(found)
    return out


QUARANTINED = (Decision.QUARANTINE, Decision.ROLLBACK)  # the pack's `guard.quarantine` says


def decision_verdict(
    decision: Decision, fired: list[str], tool: str, settings: list[GuardSettings]
) -> Verdicts | None:
    """What the target's current decision says about this call."""
    if decision not in (Decision.DISABLE, Decision.DOWNGRADE, *QUARANTINED):
        return None
    writes = any(s.is_write(tool) for s in settings)
    because = f" ({', '.join(fired)})" if fired else ""
    if decision == Decision.DISABLE:
        return Verdicts(Answer.DENY, "target_disabled", f"the target is DISABLEd{because}", ())
    if decision == Decision.DOWNGRADE:
        if not any(s.writes for s in settings):
            message = "the target is DOWNGRADEd and no pack says which tools write (guard.writes)"
            return Verdicts(Answer.REVIEW, "target_downgraded_writes_unknown", message, ())
        if writes:
            message = f"the target is DOWNGRADEd to read-only{because}; {tool} writes"
            return Verdicts(Answer.DENY, "target_downgraded", message, ())
        return None
    if decision in QUARANTINED:
        policies = [s.quarantine for s in settings] or ["deny_writes"]
        answers = [
            Answer.DENY if p == "deny_writes" and writes else Answer(p)
            for p in policies
            if p != "deny_writes" or writes
        ]
        answer = strongest_answer(answers)
        if answer == Answer.ALLOW:
            return None
        message = f"the target is {decision.value}d{because}"
        return Verdicts(answer, f"target_{decision.value.lower()}", message, ())
    return None


def judge_call(
    request: GuardRequest,
    rows: list[dict[str, Any]],
    packs: list[RulePack],
    decision: tuple[Decision, list[str]],
    span_id: str,
    now_ns: int,
    prices: PriceTable,
    grown: GrownRun | None = None,
    conversation: Conversation | None = None,
) -> GuardAnswer:
    """The answer to one guard call; `rows` are the run's stored spans of the request's
    service (none: the run is unknown), `grown` their run kept from earlier calls,
    `conversation` the session they name (None: none). The answer names the span the call
    runs under."""
    answer = weigh_call(
        request, rows, packs, decision, span_id, now_ns, prices, grown, conversation
    )
    answer.parent_span_id = parent_of_call(request, rows, grown)
    return answer


def weigh_call(
    request: GuardRequest,
    rows: list[dict[str, Any]],
    packs: list[RulePack],
    decision: tuple[Decision, list[str]],
    span_id: str,
    now_ns: int,
    prices: PriceTable,
    grown: GrownRun | None = None,
    conversation: Conversation | None = None,
) -> GuardAnswer:
    service, agent, version = request.service, request.agent, request.version
    tool = request.tool.name
    if not rows:
        chosen = [p for p in packs if p.selector.matches_target(service, agent, version)]
        on_decision = decision_verdict(*decision, tool, [p.guard for p in chosen])
        message = "no span of this run has arrived"
        return unknown(chosen, UNKNOWN, message, span_id, decision[0], on_decision)
    t = run_with_call(request, rows, span_id, now_ns, prices, grown)
    selections = [(p, selected(p, t)) for p in packs]
    chosen = [p for p, (selects, _) in selections if selects]
    asked = not request.tool.tool_call_id or call_step(t, span_id).requested_by is not None
    found: list[Verdicts] = []
    if asked:
        read: dict[int, Trajectory] = {}
        found = [
            v
            for pack, (selects, error) in selections
            if selects
            for v in pack_verdicts(t, pack, span_id, error, read)
        ]
        found += conversation_verdicts(chosen, t, span_id, now_ns, conversation)
    return answer_for(request, chosen, asked, found, decision, span_id)


def answer_for(
    request: GuardRequest,
    chosen: list[RulePack],
    asked: bool,
    found: list[Verdicts],
    decision: tuple[Decision, list[str]],
    span_id: str,
) -> GuardAnswer:
    """The answer from what the rules of the packs that select the run (`chosen`) found about
    the call, and the target's decision; `asked`: the model call that asked for the call (when
    it names its id) is in the run."""
    tool = request.tool.name
    on_decision = decision_verdict(*decision, tool, [p.guard for p in chosen])
    if not asked:
        message = (
            f"no model call of the run so far asked for call {request.tool.tool_call_id};"
            " flush the span processor before asking"
        )
        return unknown(chosen, PARTIAL, message, span_id, decision[0], on_decision)
    if on_decision is not None:
        found = [on_decision, *found]
    if not chosen and not found:
        message = "no pack in force selects this target"
        return GuardAnswer(Answer.ALLOW, [NO_PACK], [], [message], span_id, decision[0].value)
    return answer_of(found, span_id, decision[0])


def unknown(
    chosen: list[RulePack],
    reason: str,
    message: str,
    span_id: str,
    decision: Decision,
    on_decision: Verdicts | None,
) -> GuardAnswer:
    """The packs' choice for a run the guard cannot see whole (review when none says), unless
    the target's decision says more."""
    answer = strongest_answer([p.guard.on_unknown for p in chosen]) if chosen else Answer.REVIEW
    found = [Verdicts(answer, reason, message, ())]
    if on_decision is not None:
        found.insert(0, on_decision)
    if answer == Answer.ALLOW and on_decision is None:
        return GuardAnswer(Answer.ALLOW, [reason], [], [message], span_id, decision.value)
    return answer_of(found, span_id, decision)


def answer_of(found: list[Verdicts], span_id: str, decision: Decision) -> GuardAnswer:
    answer = strongest_answer([v.answer for v in found])
    if answer == Answer.ALLOW:
        return GuardAnswer(Answer.ALLOW, [], [], [], span_id, decision.value)
    counted = [v for v in found if v.answer == answer]
    return GuardAnswer(
        answer,
        list(dict.fromkeys(v.reason for v in counted)),
        list(dict.fromkeys(e for v in counted for e in v.evidence)),
        [v.message for v in counted],
        span_id,
        decision.value,
    )
