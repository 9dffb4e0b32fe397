"""The samples drift compares: one value per run or per case, weighted tool calls, rule passes."""

from __future__ import annotations

from datetime import timedelta

import numpy as np
import pytest

from collector.drift import samples
from collector.drift.sides import Side
from tests.support.store import RunStore


def test_a_repeated_case_is_one_sample_the_mean_of_its_attempts(store: RunStore) -> None:
    store.run(steps=2)
    store.run(steps=4)
    for steps in (3, 6, 9):
        store.run(steps=steps, case="lis-osl")
    values = samples.unit_values(store.cursor, Side())
    assert sorted(values["steps"]) == [2.0, 4.0, 6.0]


def test_flags_are_shares_and_an_unknown_verdict_is_no_sample(store: RunStore) -> None:
    store.run(status="error", verdict="fail")
    store.run(errors=2, verdict="pass")
    store.run(verdict=None)
    store.run(verdict="pass")
    values = samples.unit_values(store.cursor, Side())
    assert sorted(values["error_rate"]) == [0.0, 0.0, 1.0, 1.0]
    passes = values["pass_rate"]
    assert np.isnan(passes).sum() == 1
    assert sorted(passes[~np.isnan(passes)]) == [0.0, 1.0, 1.0]


def test_tool_calls_count_a_case_once_and_runs_without_tools_apart(store: RunStore) -> None:
    store.run(["search", "book"])
    store.run([])
    store.run(["search"], case="lis-osl")
    store.run(["search", "search"], case="lis-osl")
    calls, _ = samples.tools(store.cursor, Side())
    # the case: (1 + 2) / 2 calls of search per attempt
    assert calls == pytest.approx({"search": 2.5, "book": 1.0, samples.NO_TOOL: 1.0})


def test_tool_presence_counts_units_that_call_a_tool_however_often(store: RunStore) -> None:
    store.run(["search", "search", "search", "book"])
    store.run(["search"])
    store.run([])
    store.run(["book"], case="lis-osl")
    store.run(["search"], case="lis-osl")
    _, presence = samples.tools(store.cursor, Side())
    # the case calls search in half its attempts and book in the other half
    assert presence == pytest.approx({"search": 2.5, "book": 1.5, samples.NO_TOOL: 1.0})


def test_rule_passes_per_unit_leave_out_not_applicable(store: RunStore) -> None:
    rule = "travel/books-after-search"
    store.result(store.run(), rule, "pass")
    store.result(store.run(), rule, "fail")
    store.result(store.run(), rule, "not_applicable")
    for verdict in ("pass", "pass", "fail", "review"):
        store.result(store.run(case="lis-osl"), rule, verdict)
    hits, units = samples.rule_passes(store.cursor, Side())[rule]
    assert (hits, units) == (pytest.approx(1.5), 3)  # 1 + 0 + the case's 2/4


def test_a_reviewers_label_is_the_runs_verdict_of_the_rule_it_answers(store: RunStore) -> None:
    rule = "travel/known-servers"
    for label in ("pass", "fail", "not_applicable"):
        run = store.run()
        store.result(run, rule, "review")
        store.result(run, rule, label, reviewer="ana")
    store.result(store.run(), rule, "review")  # waiting for a person: a review, not a pass
    hits, units = samples.rule_passes(store.cursor, Side())[rule]
    assert (hits, units) == (1.0, 3)


def test_evidence_is_the_newest_runs_that_show_the_change(store: RunStore) -> None:
    old_error = store.run(status="error", ago=timedelta(minutes=30))
    new_error = store.run(status="error", ago=timedelta(minutes=5))
    store.run(ago=timedelta(minutes=1))
    assert samples.flag_evidence(store.cursor, Side(), "error_rate", 1, 10) == [
        new_error,
        old_error,
    ]
    slow = store.run(duration_ms=9000.0)
    assert samples.continuous_evidence(store.cursor, Side(), "latency", 1, 1) == [slow]
