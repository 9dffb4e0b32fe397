"""Golden OTLP/JSON fixtures decode to exactly the rows in their `.golden.jsonl` files.

Regenerate after an intended change with `pytest tests/unit/normalize --regen-golden`, then read
the diff: it is the review of what the change does to stored rows.
"""

from __future__ import annotations

import json
from pathlib import Path

import orjson
import pytest

from collector.normalize.wire import decode_request
from tests.support.paths import TESTDATA

FIXTURES = sorted((TESTDATA / "otlp").glob("*.json"))


def rows_of(path: Path) -> list[dict]:
    decoded = decode_request("traces", "json", path.read_bytes(), 64 * 1024)
    assert decoded.rejected == {}
    return decoded.table.to_pylist()


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: p.stem)
def test_fixture_matches_golden_rows(path: Path, request: pytest.FixtureRequest) -> None:
    golden = path.with_suffix(".golden.jsonl")
    rows = rows_of(path)
    if request.config.getoption("--regen-golden"):
        golden.write_text(
            "".join(orjson.dumps(r, option=orjson.OPT_SORT_KEYS).decode() + "\n" for r in rows)
        )
    expected = [json.loads(line) for line in golden.read_text().splitlines()]
    assert [json.loads(orjson.dumps(r)) for r in rows] == expected


def test_protobuf_and_json_encodings_give_the_same_rows() -> None:
    from tests.support.reference.otlp_json import traces_from_json

    for path in FIXTURES:
        as_protobuf = traces_from_json(path.read_bytes()).SerializeToString()
        decoded = decode_request("traces", "protobuf", as_protobuf, 64 * 1024)
        assert decoded.table.to_pylist() == rows_of(path)
