"""AnyValue conversion: every OTLP value type becomes the JSON value an SRE expects."""

from __future__ import annotations

from collector.normalize.anyvalue import AttributeReader
from tests.support.otlp import any_value, kv


def test_every_value_type_converts() -> None:
    reader = AttributeReader(1000)
    attrs = reader.attributes(
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
    assert attrs == {
        "s": "text",
        "i": 120,
        "big": 2**62,
        "d": 0.25,
        "b": True,
        "bytes": "AP8=",
        "arr": ["a", 1, 2.5, False],
        "map": {"inner": {"deep": [1, {"x": "y"}]}},
    }
    assert reader.truncated == []


def test_empty_value_is_null() -> None:
    from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue

    reader = AttributeReader(10)
    assert reader.attributes([KeyValue(key="empty", value=AnyValue())]) == {"empty": None}
    assert reader.value(AnyValue()) is None


def test_long_strings_are_cut_and_their_keys_remembered() -> None:
    reader = AttributeReader(4)
    attrs = reader.attributes([kv("long", "abcdefgh"), kv("list", ["123456"]), kv("ok", "abcd")])
    assert attrs == {"long": "abcd", "list": ["1234"], "ok": "abcd"}
    assert reader.truncated == ["long", "list"]
    assert reader.value(any_value("xxxxxx"), "body") == "xxxx"
    assert reader.truncated[-1] == "body"
