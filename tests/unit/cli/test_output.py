"""The one renderer: the same rows as an aligned table, as CSV and as JSON."""

from __future__ import annotations

import csv
import decimal
import io
import json
from datetime import datetime

import pyarrow as pa

from collector.admin.answers import CsvAnswer
from collector.cli._output import Table, emit

ROWS = [
    {"id": "a", "n": 1, "reasons": ["x", "y"], "at": datetime(2025, 6, 1, 12, 0), "skip": 1},
    {"id": "bbbb", "n": None, "reasons": [], "at": None, "skip": 2},
]


def printed(table: Table, fmt: str, doc: object = None) -> str:
    out = io.StringIO()
    emit(table, fmt, doc, out)
    return out.getvalue()


def test_a_table_aligns_columns_and_labels_them() -> None:
    text = printed(Table(ROWS, ["id", "n", "reasons"], ["ID", "N", "REASONS"]), "table")
    assert text.splitlines() == ["ID    N  REASONS", "a     1  x,y", "bbbb"]
    ruled = printed(Table(ROWS, ["id"], rule=True, footer="(2 rows)", max_width=3), "table")
    assert ruled.splitlines() == ["id", "---", "a", "bb…", "(2 rows)"]
    assert printed(Table([], ["id"], empty="nothing"), "table") == "nothing\n"


def test_csv_and_json_keep_every_value() -> None:
    parsed = list(csv.DictReader(io.StringIO(printed(Table(ROWS, ["id", "n", "reasons"]), "csv"))))
    assert parsed[0] == {"id": "a", "n": "1", "reasons": '["x","y"]'}
    assert parsed[1] == {"id": "bbbb", "n": "", "reasons": "[]"}
    rows = json.loads(printed(Table(ROWS, ["id"]), "json"))
    assert rows[0]["at"] == "2025-06-01T12:00:00Z" and rows[0]["skip"] == 1
    assert json.loads(printed(Table(ROWS, ["id"]), "json", {"whole": True})) == {"whole": True}


def test_a_csv_cell_is_written_by_one_rule_for_the_console_and_the_commands() -> None:
    """Numbers stay numbers (a negative one is no formula), bytes are hex, lists JSON, and text
    that starts like a formula is defused: the console's SQL download shares this rule."""
    row = {"n": decimal.Decimal("-1.5"), "b": b"\x01\xff", "l": ["a", 1], "f": "=1+1", "z": None}
    printed_csv = printed(Table([row], list(row)), "csv")
    assert printed_csv.splitlines()[1] == '-1.5,01ff,"[""a"",1]",\'=1+1,'
    answer = CsvAnswer()
    answer.start(pa.schema([("f", pa.string())]))
    answer.write(pa.record_batch([pa.array(["=1+1"])], names=["f"]), 1000)
    assert b"".join(answer.parts) == b"f\n'=1+1\n"
