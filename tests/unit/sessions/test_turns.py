"""A session's turns on its own clock: in arrival order, none ending after it arrived nor
starting before an earlier arrival ended; and each pack judges only the turns it selects."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

from collector.clock import naive_utc
from collector.sessions.turns import nanos, on_session_clock
from evaluators.base import Verdict
from evaluators.evaluate import evaluate_session_pack
from evaluators.rulepack import RulePack
from evaluators.sessions import Session
from tests.unit.evaluators.test_sessions import LIFETIME, turn

SECOND = 10**9
DAY = 86400 * SECOND


def pack(service: str | None = None) -> RulePack:
    return RulePack.model_validate(
        {
            "name": "sessions",
            "version": "1",
            "owner": "support-oncall",
            "selector": {"service": service},
            "approvals": {"tools": ["request_approval"]},
            "rules": [{**LIFETIME, "max_age": "10m"}],
        }
    )


def test_a_turn_stamped_ahead_ends_when_it_arrived() -> None:
    ahead = turn("python_sdk-genai_semconv", "approved_write", 1, DAY)
    arrived = naive_utc(ahead.start_time_unix_nano / 1e9) - timedelta(days=1, seconds=-5)
    (moved,) = on_session_clock([ahead], {ahead.trace_id: arrived})
    assert moved.end_time_unix_nano == nanos(arrived)
    # whole: its steps keep their spacing
    gaps = [s.start_time_unix_nano - moved.start_time_unix_nano for s in moved.steps]
    assert gaps == [s.start_time_unix_nano - ahead.start_time_unix_nano for s in ahead.steps]


def test_a_later_arrival_stamped_earlier_starts_after_the_turns_before_it() -> None:
    write = turn("python_sdk-genai_semconv", "missing_approval", 1, 60 * SECOND)
    approval = turn("python_sdk-genai_semconv", "approved_write", 2)  # stamped a minute before
    late = naive_utc(write.end_time_unix_nano / 1e9 + 10)
    first, second = on_session_clock([write, approval], {approval.trace_id: late})
    assert first is write
    assert second.start_time_unix_nano == write.end_time_unix_nano
    # so the approval does not cover the write that was judged before it arrived
    found = evaluate_session_pack(Session("s", [first, second]), pack())
    assert [r.verdict for r in found] == [Verdict.FAIL]
    reordered = evaluate_session_pack(Session("s", [approval, write]), pack())
    assert [r.verdict for r in reordered] != [Verdict.FAIL]  # what the stamps alone would say


def test_a_pack_judges_the_turns_it_selects_whatever_turn_came_last() -> None:
    write = turn("python_sdk-genai_semconv", "missing_approval", 1)
    other = replace(
        turn("python_sdk-genai_semconv", "approved_write", 2, DAY), service_name="billing-desk"
    )
    support = pack(write.service_name)
    (result,) = evaluate_session_pack(Session("s", [write, other]), support)
    # the other service's approval is not evidence for this pack, and its turn being the
    # latest does not silence it
    assert result.verdict == Verdict.FAIL and result.traces == (write.trace_id,)
    assert evaluate_session_pack(Session("s", [other]), support) == []
