"""The one precedence table, and what is derived from it: the SQL ordering and the help text."""

from __future__ import annotations

import duckdb

from collector.decisions.history import strength_sql
from collector.decisions.metrics import GAUGE_STRENGTH
from evaluators.base import DECISION_PRECEDENCE, Decision, precedence_text


def test_the_table_names_every_decision_once_strongest_first() -> None:
    assert sorted(DECISION_PRECEDENCE) == sorted(Decision)
    assert DECISION_PRECEDENCE[0] == Decision.DISABLE
    assert DECISION_PRECEDENCE[-1] == Decision.PASS


def test_the_help_text_reads_the_table() -> None:
    assert precedence_text() == "DISABLE > ROLLBACK > QUARANTINE > DOWNGRADE > FAIL > REVIEW > PASS"


def test_sql_orders_decisions_as_the_table_does() -> None:
    con = duckdb.connect()
    con.execute("CREATE TABLE d (decision VARCHAR)")
    con.executemany("INSERT INTO d VALUES (?)", [[d.value] for d in sorted(Decision)] + [["?"]])
    ordered = [
        r[0] for r in con.execute(f"SELECT decision FROM d ORDER BY {strength_sql()}").fetchall()
    ]
    assert ordered == [d.value for d in DECISION_PRECEDENCE] + ["?"]  # unknown values last


def test_the_strength_gauge_grows_with_the_decision() -> None:
    assert [GAUGE_STRENGTH[d] for d in reversed(DECISION_PRECEDENCE)] == list(range(len(Decision)))
