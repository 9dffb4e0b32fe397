"""The rollout benchmark replays a canary rule's looks over simulated lives: a new tool is
caught within the hour, while unchanged canaries (one starting mid-ramp) are not rolled back."""

from __future__ import annotations

from collector.bench.rollouts import ROLLOUTS, canary_rule, simulate

BY_NAME = {r.name: r for r in ROLLOUTS}


def test_a_new_tool_is_caught_and_unchanged_canaries_live_on() -> None:
    rollouts = (BY_NAME["ramp_mid_window"], BY_NAME["independent"], BY_NAME["new_tool"])
    rules = {"0.01": canary_rule(0.01)}
    ramp, null, shifted = simulate(rollouts, canaries=8, rules=rules, hours=2.0)
    assert (ramp.rollout.name, ramp.rule, ramp.canaries) == ("ramp_mid_window", "0.01", 8)
    assert ramp.fired.k <= 1 and null.fired.k <= 1
    assert shifted.fired.k >= 7 and shifted.by_metric == {"tool_choice": shifted.fired.k}
    assert shifted.median_delay is not None and 30 <= shifted.median_delay <= 120
    assert shifted.by_runs.k == shifted.fired.k  # 2 h at 60 runs an hour: within 120 a side
