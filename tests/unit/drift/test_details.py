"""What a drift result stores of its decision: each side's value of the metric, the raw and the
adjusted p-value, and per tool its share of runs on both sides, how it moved and its own test;
the same numbers the verdict and the message were made from."""

from __future__ import annotations

import json

import numpy as np
import pytest

from collector.drift.details import encoded, movement, percentiles, tool_shares
from collector.drift.evaluate import evaluate_drift
from evaluators.base import Verdict
from tests.support.canary import RUNS, TRAVEL, A, B, canary, send
from tests.support.store import NOW, RunStore


@pytest.mark.parametrize("anytime", [True, False])
def test_a_canary_result_names_the_tools_that_moved_with_their_shares_and_tests(
    store: RunStore, anytime: bool
) -> None:
    send(store, "1.4.0", A)
    send(store, "1.5.0", B)
    rule = canary(metrics=["tool_choice", "steps", "error_rate"], sequential=anytime)
    outcomes = {o.metric: o for o in evaluate_drift(store.cursor, TRAVEL, rule, NOW)}
    tool = outcomes["tool_choice"]
    assert tool.verdict == Verdict.FAIL and tool.details is not None
    assert tool.details["mode"] == "canary"
    assert tool.details["baseline_versions"] == ["1.4.0"]
    assert tool.details["p_adjusted"] == tool.p_value
    assert f"p={tool.details['p_raw']:.3g}" in tool.message
    tools = {t["tool"]: t for t in tool.details["tools"]}
    assert (tools["reserve_seat_v2"]["baseline"], tools["reserve_seat_v2"]["current"]) == (0.0, 1.0)
    assert tools["reserve_seat_v2"]["change"] == "appeared"
    assert tools["hold_seat"]["change"] == "vanished"
    assert tools["search_flights"]["change"] == "unchanged"
    new = tools["reserve_seat_v2"]
    assert new["p_raw"] is not None and new["p_raw"] <= new["p_adjusted"] <= 1.0
    assert new["p_adjusted"] == tool.p_value  # the tool the mix was judged on
    assert {t["tool"] for t in tool.details["tools"][:2]} == {"reserve_seat_v2", "hold_seat"}
    steps = outcomes["steps"].details
    assert steps is not None and steps["unit"] == "steps"
    assert steps["baseline"] == steps["current"] == {"p50": 4.0, "p95": 4.0}
    errors = outcomes["error_rate"].details
    assert errors is not None and (errors["baseline"], errors["current"]) == (0.0, 0.0)
    assert outcomes["steps"].baseline_n == RUNS


def test_a_metric_with_no_samples_on_a_side_has_no_value_there() -> None:
    assert percentiles(np.array([np.nan])) is None
    assert percentiles(np.array([1.0, 2.0, 3.0, np.nan])) == {"p50": 2.0, "p95": 2.9}


def test_a_tool_share_is_of_the_runs_that_call_it() -> None:
    shares = tool_shares({"a": 10.0}, {"a": 5.0, "b": 20.0}, 20, 40)
    assert shares == {
        "a": {"baseline": 0.5, "current": 0.125},
        "b": {"baseline": 0.0, "current": 0.5},
    }


@pytest.mark.parametrize(
    ("baseline", "current", "change"),
    [
        (0.0, 0.3, "appeared"),
        (None, 0.3, "appeared"),
        (0.9, 0.0, "vanished"),
        (0.5, 0.25, "shifted"),
        (0.5, 0.5, "unchanged"),
    ],
)
def test_how_a_tool_moved(baseline: float | None, current: float, change: str) -> None:
    assert movement(baseline, current) == change


def test_details_not_representable_in_json_are_stored_as_null() -> None:
    text = encoded({"p_raw": float("nan"), "tools": [{"current": float("inf")}]})
    assert text is not None and json.loads(text) == {"p_raw": None, "tools": [{"current": None}]}
    assert encoded(None) is None
