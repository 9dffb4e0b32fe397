"""The drift calibration benchmark measures the shipped procedure: a shift it is built to show
is caught, an unchanged canary is not failed, and every canary is judged on enough runs."""

from __future__ import annotations

from collector.bench.calibration import Rate, calibrate
from collector.bench.canaries import SCENARIOS

BY_NAME = {s.name: s for s in SCENARIOS}


def test_a_new_tool_is_caught_and_an_unchanged_canary_passes() -> None:
    scenarios = (BY_NAME["independent"], BY_NAME["new_tool"])
    null, shifted = calibrate(scenarios, canaries=8, runs=60, alpha=0.01, corrections=("holm",))
    assert (null.scenario.name, null.correction, null.canaries) == ("independent", "holm", 8)
    assert null.failed.k <= 1 and null.reviews == 0
    assert shifted.per_metric["tool_choice"].k >= 7
    assert set(null.per_metric) >= {"tool_choice", "latency", "pass_rate", "error_rate"}


def test_repeated_cases_are_samples_once_each() -> None:
    # 20 cases x 3 attempts a side: 60 runs, but 20 samples, under the rule's min_samples of 30
    [few] = calibrate((BY_NAME["repeated_cases"],), 2, runs=40, alpha=0.01, corrections=("none",))
    assert (few.reviews, few.failed.k) == (2, 0)
    [enough] = calibrate(
        (BY_NAME["repeated_cases"],), 2, runs=60, alpha=0.01, corrections=("none",)
    )
    assert enough.reviews == 0


def test_rates_carry_an_exact_interval() -> None:
    low, high = Rate(0, 400).interval
    assert low == 0.0 and 0.009 < high < 0.0095
    assert Rate(3, 10).value == 0.3
