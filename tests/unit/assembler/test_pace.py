"""The pace of assembly turns the spans held into the lag they will cause."""

from __future__ import annotations

import pytest

from collector.assembler.pace import LEAST_SPANS, PRIOR_SPANS_PER_SECOND_PER_WORKER, Pace


def test_before_any_round_the_prior_pace_is_assumed_for_each_worker() -> None:
    pace = Pace(workers=2)
    assert pace.spans_per_second() == 2 * PRIOR_SPANS_PER_SECOND_PER_WORKER
    pace.record(LEAST_SPANS - 1, 0.001)  # a small round: its fixed cost, not its pace
    assert pace.spans_per_second() == 2 * PRIOR_SPANS_PER_SECOND_PER_WORKER


def test_spans_held_past_what_the_quiet_period_covers_are_lag() -> None:
    pace = Pace(workers=1)
    pace.record(20_000, 1.0)
    pace.record(10_000, 1.0)
    assert pace.spans_per_second() == 15_000
    quiet = 5.0
    assert pace.expected_lag(15_000 * 5, quiet) == 0  # held as fast as they close: on time
    assert pace.expected_lag(15_000 * 7, quiet) == pytest.approx(2.0)
