"""A drift round reads one snapshot: runs committed while it runs are in none of its queries,
and a target whose evaluation fails is a REVIEW of its own, not the loss of the whole round."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

import duckdb
import pytest

from collector.drift.evaluate import evaluate_drift
from collector.drift.outcome import EVALUATION_ERROR
from collector.drift.reliability import evaluate_reliability
from collector.store.reader import Interrupted, Reader
from evaluators.base import Verdict
from evaluators.rulepack import Selector
from evaluators.window import ReliabilityRule
from tests.support.canary import TRAVEL, A, B, canary, send
from tests.support.store import NOW, RunStore


class CommitsMidRound:
    """A round's cursor; before its query number `at`, another connection commits."""

    def __init__(self, cursor: duckdb.DuckDBPyConnection, at: int, commit: Callable[[], None]):
        self.cursor, self.at, self.commit = cursor, at, commit
        self.queries = 0

    def execute(self, *args: Any) -> duckdb.DuckDBPyConnection:
        self.queries += 1
        if self.queries == self.at:
            self.commit()
        return self.cursor.execute(*args)


class FailsFor:
    """A round's cursor on which the first query about one service version runs a statement
    that DuckDB itself fails (a conversion error), aborting the round's transaction."""

    def __init__(self, cursor: duckdb.DuckDBPyConnection, version: str) -> None:
        self.cursor, self.version = cursor, version

    def execute(self, sql: str, params: Any = None) -> duckdb.DuckDBPyConnection:
        if params and self.version in list(params):
            return self.cursor.execute("SELECT CAST(? AS INTEGER)", [self.version])
        return self.cursor.execute(sql, params)


def test_runs_committed_between_a_rounds_queries_are_in_none_of_them(store: RunStore) -> None:
    send(store, "1.4.0", A)
    send(store, "1.5.0", B)

    def more_runs() -> None:  # new canary runs close after the runs were counted
        for i in range(10):
            store.run(["reserve_seat_v2"], version="1.5.0", ago=timedelta(seconds=10 + i))

    # Queries: the targets, both sides' runs, then the tool callers.
    with Reader(store.database).cursor() as cursor:
        mid_round = CommitsMidRound(cursor, at=4, commit=more_runs)
        [outcome] = evaluate_drift(mid_round, TRAVEL, canary(), NOW)  # type: ignore[arg-type]
    assert mid_round.queries > 4 and store.added == 50  # the commit did land mid-round
    assert (outcome.verdict, outcome.current_n) == (Verdict.FAIL, 20)
    with Reader(store.database).cursor() as cursor:  # the next round sees them
        [outcome] = evaluate_drift(cursor, TRAVEL, canary(), NOW)
    assert outcome.current_n == 30


def test_a_target_that_fails_is_reviewed_and_the_later_ones_are_judged(store: RunStore) -> None:
    send(store, "1.4.0", A)
    send(store, "1.5.0", B)
    send(store, "1.5.1", B)
    reader = Reader(store.database)
    with reader.cursor() as cursor:  # 1.5.0 is evaluated first and fails
        outcomes = evaluate_drift(FailsFor(cursor, "1.5.0"), TRAVEL, canary(), NOW, reader=reader)  # type: ignore[arg-type]
    by_version = {o.target[2]: o for o in outcomes}
    failed = by_version["1.5.0"]
    assert (failed.verdict, failed.reason) == (Verdict.REVIEW, EVALUATION_ERROR)
    assert "ConversionException" in failed.message
    assert (by_version["1.5.1"].verdict, by_version["1.5.1"].current_n) == (Verdict.FAIL, 20)


def test_a_reliability_target_that_fails_is_reviewed_and_the_later_ones_are_judged(
    store: RunStore,
) -> None:
    for version, verdict in (("1.4.0", "pass"), ("1.5.0", "fail")):
        for case in range(3):
            for attempt in range(3):
                store.run(
                    A,
                    version=version,
                    case=f"c{case}",
                    verdict=verdict,
                    ago=timedelta(minutes=1 + attempt),
                )
    rule = ReliabilityRule.model_validate(
        {
            "id": "reliable",
            "type": "reliability",
            "reason": "unreliable",
            "metric": "pass_at_k",
            "k": 2,
            "min_cases": 1,
            "min": 0.5,
        }
    )
    selector = Selector(service="travel-desk")
    reader = Reader(store.database)
    with reader.cursor() as cursor:  # 1.4.0 is evaluated first and fails
        judged = evaluate_reliability(FailsFor(cursor, "1.4.0"), selector, rule, NOW, reader=reader)  # type: ignore[arg-type]
    by_version = {o.target[2]: o for o, _ in judged}
    assert (by_version["1.4.0"].verdict, by_version["1.4.0"].reason) == (
        Verdict.REVIEW,
        EVALUATION_ERROR,
    )
    assert by_version["1.5.0"].verdict == Verdict.FAIL


def test_a_failure_after_shutdown_interrupted_the_reader_ends_the_round(store: RunStore) -> None:
    """An interrupt can surface as another error (an OSError through an Arrow stream): once
    the reader is interrupted, no target is reviewed for it, the round is abandoned."""
    send(store, "1.4.0", A)
    send(store, "1.5.0", B)
    reader = Reader(store.database)
    with pytest.raises(Interrupted), reader.cursor() as cursor:
        reader.interrupted = True
        evaluate_drift(FailsFor(cursor, "1.5.0"), TRAVEL, canary(), NOW, reader=reader)  # type: ignore[arg-type]
