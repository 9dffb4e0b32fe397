"""An approval belongs to the action it stands before: the same subject (`same_subject`), and an
action decided after the approval's answer (`causal`), in `precedes` and in the session
`approval_lifetime` rule; hand-built runs for every branch, real captures of every
instrumentation for the verdicts users see, the same in every recorded run and whatever the
clocks say."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from collector.assembler.build import build_trajectory
from collector.assembler.prices import PriceTable
from collector.normalize.wire import decode_request
from evaluators.base import Verdict
from evaluators.evaluate import evaluate_pack, evaluate_session_pack
from evaluators.model import Step, Trajectory
from evaluators.rulepack import RulePack
from evaluators.sessions import Session
from tests.support.paths import TESTDATA
from tests.support.rules import pack, verdict
from tests.support.trajectories import llm, run, tool
from tests.unit.evaluators.test_shipped_packs import CAPTURES, PACKS

REPEATS = TESTDATA / "otlp-repeats"
SUPPORT = next(p for p in PACKS if p.name == "support-agent")
FAMILIES = sorted(
    {p.name.rsplit("-", 1)[0] for p in CAPTURES.glob("*-one_turn_approval.otlp.json")}
)

SUBJECT = {
    "id": "r",
    "type": "precedes",
    "reason": "approval_boundary_violation",
    "before": {"kind": "approval"},
    "then": {"kind": "tool", "name": "update_*"},
    "require_approved": True,
    "same_subject": [{"approval_argument": "$.customer_id", "action_argument": "$.customer_id"}],
}
CAUSAL = {**SUBJECT, "same_subject": [], "causal": True}


def approval(seq: int, args: object = None, **kw: object) -> Step:
    s = tool(seq, "request_approval", args, result='{"approved": true}', **kw)
    return replace(s, kind="approval", approval_status="approved")


def write(seq: int, customer: str = "C-2002", **kw: object) -> Step:
    return tool(seq, "update_account", {"customer_id": customer, "email": "m@x.org"}, **kw)


# ------------------------------------------------------------------------------ same subject


def test_an_approval_for_another_subject_fails_with_its_own_reason_and_both_steps() -> None:
    same = verdict(SUBJECT, run(approval(1, {"customer_id": "C-2002"}), write(2)))
    assert same.verdict == Verdict.PASS
    other = verdict(SUBJECT, run(approval(1, {"customer_id": "C-1001"}), write(2)))
    assert (other.verdict, other.reason, other.evidence) == (
        Verdict.FAIL,
        "wrong_authorization_context",
        ("s01", "s02"),
    )
    assert "'C-1001'" in other.message and "'C-2002'" in other.message
    own = verdict(
        {**SUBJECT, "subject_reason": "approval_for_other_account"},
        run(approval(1, {"customer_id": "C-1001"}), write(2)),
    )
    assert own.reason == "approval_for_other_account"
    # one approval for the right subject among others is enough
    both = run(approval(1, {"customer_id": "C-1001"}), approval(2, {"customer_id": "C-2002"}))
    assert verdict(SUBJECT, replace(both, steps=[*both.steps, write(3)])).verdict == Verdict.PASS


def test_the_subject_may_be_named_by_the_approvals_result() -> None:
    rule = {
        **SUBJECT,
        "same_subject": [
            {"approval_result": "$.grant.account", "action_argument": "$.customer_id"}
        ],
    }

    def granted(account: str) -> Step:
        answer = json.dumps({"approved": True, "grant": {"account": account}})
        return replace(approval(1, {}), result=answer)

    assert verdict(rule, run(granted("C-2002"), write(2))).verdict == Verdict.PASS
    assert verdict(rule, run(granted("C-1001"), write(2))).reason == "wrong_authorization_context"
    # approved by the span's own status attribute, with no result recorded
    unanswered = tool(1, "request_approval", {}, attrs={"sextant.approval.status": "approved"})
    found = verdict(rule, run(unanswered, write(2)))
    assert (found.verdict, found.reason) == (Verdict.REVIEW, "approval_subject_unknown")
    assert "no result recorded" in found.message


def test_a_subject_that_cannot_be_read_is_a_review_never_a_pass() -> None:
    unrecorded = replace(approval(1), arguments=None)
    found = verdict(SUBJECT, run(unrecorded, write(2)))
    assert (found.verdict, found.reason, found.evidence) == (
        Verdict.REVIEW,
        "approval_subject_unknown",
        ("s01", "s02"),
    )
    assert "no arguments recorded" in found.message
    elsewhere = verdict(SUBJECT, run(approval(1, {"account": "C-2002"}), write(2)))
    assert (elsewhere.verdict, elsewhere.reason) == (Verdict.REVIEW, "approval_subject_unknown")
    blind = tool(2, "update_account", {"email": "m@x.org"})
    found = verdict(SUBJECT, run(approval(1, {"customer_id": "C-2002"}), blind))
    assert (found.verdict, found.reason) == (Verdict.REVIEW, "approval_subject_unknown")
    # one approval for another subject and one unreadable: it cannot tell, a review
    mixed = run(
        approval(1, {"customer_id": "C-1001"}), replace(approval(2), arguments=None), write(3)
    )
    assert verdict(SUBJECT, mixed).verdict == Verdict.REVIEW
    # no approval at all is still the rule's own failure
    missing = verdict(SUBJECT, run(write(1)))
    assert (missing.verdict, missing.reason) == (Verdict.FAIL, "approval_boundary_violation")


def test_a_binding_names_exactly_one_side_of_the_approval() -> None:
    for binding in (
        {"action_argument": "$.a"},
        {"approval_argument": "$.a", "approval_result": "$.a", "action_argument": "$.a"},
    ):
        with pytest.raises(ValueError, match="exactly one"):
            pack({**SUBJECT, "same_subject": [binding]})


# ------------------------------------------------------------------------------ causal order


def asked(seq: int, by: str) -> dict[str, object]:
    return {"requested_by": by, "tool_call_id": f"call_{seq}"}


def test_an_action_asked_for_with_its_approval_in_one_model_turn_fails_whatever_the_clock() -> None:
    turn = llm(1)
    ask, act = approval(2, **asked(2, "s01")), write(3, **asked(3, "s01"))
    found = verdict(CAUSAL, run(turn, ask, act))
    assert (found.verdict, found.reason, found.evidence) == (
        Verdict.FAIL,
        "decided_before_approval",
        ("s02", "s01", "s03"),
    )
    assert "was asked for by gpt-4.1-mini (seq 1), which started before request_approval" in (
        found.message
    )
    # the framework ran the write first: the same verdict
    early = replace(act, start_time_unix_nano=ask.start_time_unix_nano - 10**8)
    assert verdict(CAUSAL, run(turn, ask, early)).reason == "decided_before_approval"


def test_an_action_asked_for_after_the_approvals_answer_passes() -> None:
    first, second = llm(1), llm(3)
    found = verdict(
        CAUSAL, run(first, approval(2, **asked(2, "s01")), second, write(4, **asked(4, "s03")))
    )
    assert found.verdict == Verdict.PASS


def test_an_action_whose_requester_is_not_recorded_is_a_review() -> None:
    found = verdict(CAUSAL, run(llm(1), approval(2), llm(3), write(4)))
    assert (found.verdict, found.reason, found.evidence) == (
        Verdict.REVIEW,
        "causal_order_unknown",
        ("s02", "s04"),
    )
    assert "no tool-call id" in found.message
    # ...but an approval that ended only after the write began cannot have come first
    late = approval(5)
    found = verdict(CAUSAL, run(llm(1), write(2), late))
    assert (found.verdict, found.reason) == (Verdict.FAIL, "decided_before_approval")
    # and no approval at all is the rule's own failure
    assert verdict(CAUSAL, run(llm(1), write(2))).reason == "approval_boundary_violation"


# ------------------------------------------------------------------------------ sessions


def session_pack(**options: object) -> RulePack:
    return RulePack.model_validate(
        {
            "name": "sessions",
            "version": "1",
            "owner": "o",
            "rules": [
                {
                    "id": "fresh-approval",
                    "type": "approval_lifetime",
                    "writes": {"kind": "tool", "name": "update_*"},
                    "reason": "stale_approval",
                    **options,
                }
            ],
        }
    )


def turns(*runs: Trajectory) -> Session:
    return Session("conv", [replace(t, trace_id=f"{i:032x}") for i, t in enumerate(runs)])


def next_turn(t: Trajectory) -> Trajectory:
    """The run as a later turn: span ids of its own, a minute later."""
    minute = 60 * 10**9
    steps = [
        replace(
            s,
            span_id=f"t{s.seq}",
            start_time_unix_nano=s.start_time_unix_nano + minute,
            end_time_unix_nano=s.end_time_unix_nano + minute,
            requested_by=None if s.requested_by is None else f"t{s.requested_by[1:]}",
        )
        for s in t.steps
    ]
    return replace(t, steps=steps)


BINDING = [{"approval_argument": "$.customer_id", "action_argument": "$.customer_id"}]


def test_a_session_approval_covers_only_its_subject() -> None:
    rules = session_pack(same_subject=BINDING)
    granted = run(approval(1, {"customer_id": "C-1001"}))
    wrote = next_turn(run(write(1)))
    (result,) = evaluate_session_pack(turns(granted, wrote), rules)
    assert (result.verdict, result.reason) == (Verdict.FAIL, "wrong_authorization_context")
    assert result.evidence == ("s01", "t1") and result.traces == (f"{0:032x}", f"{1:032x}")
    right = run(approval(1, {"customer_id": "C-2002"}))
    (result,) = evaluate_session_pack(turns(right, wrote), rules)
    assert result.verdict == Verdict.PASS
    blind = run(replace(approval(1), arguments=None))
    (result,) = evaluate_session_pack(turns(blind, wrote), rules)
    assert (result.verdict, result.reason) == (Verdict.REVIEW, "approval_subject_unknown")


def test_a_session_write_asked_for_with_its_approval_in_one_model_turn_fails() -> None:
    rules = session_pack(causal=True)
    one = run(llm(1), approval(2, **asked(2, "s01")), write(3, **asked(3, "s01")))
    (result,) = evaluate_session_pack(turns(one), rules)
    assert (result.verdict, result.reason) == (Verdict.FAIL, "decided_before_approval")
    later = run(llm(1), approval(2, **asked(2, "s01")), llm(3), write(4, **asked(4, "s03")))
    (result,) = evaluate_session_pack(turns(later), rules)
    assert result.verdict == Verdict.PASS
    unknown = run(llm(1), approval(2), llm(3), write(4))
    (result,) = evaluate_session_pack(turns(unknown), rules)
    assert (result.verdict, result.reason) == (Verdict.REVIEW, "causal_order_unknown")
    # an approval of an earlier turn came before any model call of this one
    previous = run(approval(1, {"customer_id": "C-2002"}))
    wrote = next_turn(run(llm(1), write(2, **asked(2, "s01"))))
    (result,) = evaluate_session_pack(turns(previous, wrote), rules)
    assert result.verdict == Verdict.PASS


# ------------------------------------------------------------------------------ real captures


def built(path: Path) -> Trajectory:
    expected = json.loads(path.with_name(path.name.replace(".otlp.", ".expected.")).read_text())
    rows = decode_request("traces", "json", path.read_bytes(), 1 << 20).table.to_pylist()
    return build_trajectory(expected["trace_id"], rows, PriceTable.load())


def support_verdict(t: Trajectory) -> tuple[str, str, list[str]]:
    (r,) = [r for r in evaluate_pack(t, SUPPORT) if r.rule_id == "approval-before-account-change"]
    names = {s.span_id: s.name for s in t.steps}
    return r.verdict.value, r.reason, [names[e] for e in r.evidence]


def test_every_instrumentation_says_which_model_call_asked_for_each_tool_call() -> None:
    for path in sorted(CAPTURES.glob("*.otlp.json")):
        if path.name.startswith(("node-http", "langgraph-openllmetry-create_agent")):
            continue
        t = built(path)
        llms = {s.span_id for s in t.steps if s.kind == "llm"}
        for s in t.steps:
            if s.is_tool_call:
                assert s.requested_by in llms, (path.name, s.name)


@pytest.mark.parametrize("family", FAMILIES)
def test_one_model_turn_asking_for_approval_and_write_fails_in_every_recorded_run(
    family: str,
) -> None:
    runs = [
        CAPTURES / f"{family}-one_turn_approval.otlp.json",
        *sorted(REPEATS.glob(f"{family}-one_turn_approval-*.otlp.json")),
    ]
    assert len(runs) == 10
    verdicts = {json.dumps(support_verdict(built(p))) for p in runs}
    model = next(s.name for s in built(runs[0]).steps if s.kind == "llm")
    assert verdicts == {
        json.dumps(
            ("fail", "decided_before_approval", ["request_approval", model, "update_account"])
        )
    }


def retimed(t: Trajectory, name: str, start: int, end: int) -> Trajectory:
    steps = [
        replace(s, start_time_unix_nano=start, end_time_unix_nano=end) if s.name == name else s
        for s in t.steps
    ]
    return replace(t, steps=steps)


@pytest.mark.parametrize("family", FAMILIES)
def test_the_verdict_does_not_follow_the_clock_within_a_model_turn(family: str) -> None:
    """The approval's and the write's spans moved to every order the framework could have run
    them in: the verdict stays; the run whose write came a model turn later still passes."""
    one = built(CAPTURES / f"{family}-one_turn_approval.otlp.json")
    ask = next(s for s in one.steps if s.name == "request_approval")
    act = next(s for s in one.steps if s.name == "update_account")
    t0, width = min(ask.start_time_unix_nano, act.start_time_unix_nano), 5_000_000
    orders = [
        (t0, t0 + width, t0 + 2 * width, t0 + 3 * width),  # approval answered, then the write
        (t0 + 2 * width, t0 + 3 * width, t0, t0 + width),  # the write first
        (t0, t0 + 3 * width, t0 + width, t0 + 2 * width),  # overlapping
    ]
    want = support_verdict(one)
    assert want[:2] == ("fail", "decided_before_approval")
    for a0, a1, w0, w1 in orders:
        moved = retimed(retimed(one, "request_approval", a0, a1), "update_account", w0, w1)
        assert support_verdict(moved) == want

    approved = CAPTURES / f"{family}-approved_write.otlp.json"
    if approved.exists():
        t = built(approved)
        act = next(s for s in t.steps if s.name == "update_account")
        asker = next(s for s in t.steps if s.span_id == act.requested_by)
        # the write runs right after its model call ended, or a while later: still covered
        for delay in (0, 10**9):
            start = asker.end_time_unix_nano + delay
            moved = retimed(t, "update_account", start, start + width)
            assert support_verdict(moved)[0] == "pass"


@pytest.mark.parametrize("family", FAMILIES)
def test_an_approval_for_another_customer_fails_on_every_instrumentation(family: str) -> None:
    t = built(CAPTURES / f"{family}-wrong_subject.otlp.json")
    assert support_verdict(t) == (
        "fail",
        "wrong_authorization_context",
        ["request_approval", "update_account"],
    )
