"""AnyValue conversion: every OTLP value type becomes the JSON value an SRE expects."""

from __future__ import annotations

import json

from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue

from tests.support.decoding import decoded_log, decoded_span
from tests.support.otlp import kv


def test_every_value_type_converts() -> None:
    row = decoded_span(
        [
            kv("s", "text"),
            kv("i", 120),
            kv("big", 2**62),
            kv("d", 0.25),
            kv("b", True),
            kv("bytes", b"\x00\xff"),
            kv("arr", ["a", 1, 2.5, False]),
            kv("map", {"inner": {"deep": [1, {"x": "y"}]}}),
        ]
    )
    assert json.loads(row["attributes"]) == {
        "s": "text",
        "i": 120,
        "big": 2**62,
        "d": 0.25,
        "b": True,
        "bytes": "AP8=",
        "arr": ["a", 1, 2.5, False],
        "map": {"inner": {"deep": [1, {"x": "y"}]}},
    }
    assert row["truncated_attributes"] is None


def test_empty_value_is_null() -> None:
    row = decoded_span([KeyValue(key="empty", value=AnyValue()), KeyValue(key="unset")])
    assert json.loads(row["attributes"]) == {"empty": None, "unset": None}
    assert decoded_log({"body": None})["body"] == "null"


def test_long_strings_are_cut_and_their_keys_remembered() -> None:
    # 8 characters: the resource's service.name ("test-svc") just fits
    attributes = [kv("long", "abcdefghij"), kv("list", ["1234567890"]), kv("ok", "abcdefgh")]
    row = decoded_span(attributes, limit=8)
    assert json.loads(row["attributes"]) == {
        "long": "abcdefgh",
        "list": ["12345678"],
        "ok": "abcdefgh",
    }
    assert row["truncated_attributes"] == ["long", "list"]
    log = decoded_log({"body": "xxxxxxxxxx"}, limit=8)
    assert (json.loads(log["body"]), log["truncated_attributes"]) == ("xxxxxxxx", ["body"])


def test_the_cut_counts_characters_not_bytes() -> None:
    row = decoded_span([kv("word", "ééééééééé")], limit=8)
    assert json.loads(row["attributes"]) == {"word": "éééééééé"}
