"""The pace of assembly turns the spans held into the lag they will cause."""

from __future__ import annotations

import pytest

from collector.assembler.pace import (
    LEAST_SPANS,
    PRIOR_SPANS_PER_SECOND_PER_NATIVE_THREAD,
    PRIOR_SPANS_PER_SECOND_PER_WORKER,
    Pace,
)


def test_before_any_round_the_prior_pace_is_assumed_for_each_worker() -> None:
    pace = Pace(workers=2)
    assert pace.spans_per_second() == 2 * PRIOR_SPANS_PER_SECOND_PER_WORKER
    pace.record(LEAST_SPANS - 1, 0.001)  # a small round: its fixed cost, not its pace
    assert pace.spans_per_second() == 2 * PRIOR_SPANS_PER_SECOND_PER_WORKER


def test_native_threads_are_assumed_faster_than_worker_processes_before_any_round() -> None:
    """A native round of 20,000 spans takes 0.3-0.4 s on two threads: assuming a worker
    process's pace for it refused a start-up burst of a few seconds it works off in one."""
    native = Pace(workers=2, native=True)
    assert native.spans_per_second() == 2 * PRIOR_SPANS_PER_SECOND_PER_NATIVE_THREAD
    assert native.spans_per_second() > Pace(workers=2).spans_per_second()
    quiet = 5.0
    burst = 100_000  # 5 s of 20,000 spans/s, held through the quiet period
    assert Pace(workers=2).expected_lag(burst, quiet) > 2  # refused with the workers' prior
    assert native.expected_lag(burst, quiet) < 2
    native.record(20_000, 2.0)  # then measured rounds replace the prior
    assert native.spans_per_second() == 10_000


def test_spans_held_past_what_the_quiet_period_covers_are_lag() -> None:
    pace = Pace(workers=1)
    pace.record(20_000, 1.0)
    pace.record(10_000, 1.0)
    assert pace.spans_per_second() == 15_000
    quiet = 5.0
    assert pace.expected_lag(15_000 * 5, quiet) == 0  # held as fast as they close: on time
    assert pace.expected_lag(15_000 * 7, quiet) == pytest.approx(2.0)
