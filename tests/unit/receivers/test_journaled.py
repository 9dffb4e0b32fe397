"""A journal frame that no longer decodes whole loses only the resources that do not decode."""

from __future__ import annotations

import logging

import pytest

from collector.normalize.wire import decode_request
from collector.receivers.coalesce import split_fields
from collector.receivers.journaled import decode_journaled
from collector.store.journal import Frame
from tests.support.otlp import simple_spans, trace_request

# A whole field 1 (resource_spans) whose content is not a ResourceSpans message: what a request
# that decoded when it was acknowledged would look like to a decoder that no longer reads it.
UNREADABLE = b"\x0a\x04\xff\xff\xff\xff"


def body(spans: int) -> bytes:
    return trace_request(simple_spans(spans)).SerializeToString()


def frame(payload: bytes, encoding: str = "protobuf") -> Frame:
    return Frame(7, "traces", encoding, 4096, payload)


def span_ids(payload: bytes) -> list[str]:
    table = decode_request("traces", "protobuf", payload, 4096).table
    assert table is not None
    return table["span_id"].to_pylist()


def test_split_fields_gives_each_resource_as_a_request_of_its_own() -> None:
    first, second = body(3), body(2)
    parts = split_fields(first + second)
    assert parts is not None and b"".join(parts) == first + second
    assert [s for p in parts for s in span_ids(p)] == span_ids(first) + span_ids(second)
    assert split_fields((first + second)[:-1]) is None  # torn: the last field runs past the end
    assert split_fields(b"") == []


def test_a_joined_frame_with_an_unreadable_request_keeps_the_others(
    caplog: pytest.LogCaptureFixture,
) -> None:
    first, second = body(3), body(2)
    with caplog.at_level(logging.ERROR):
        table = decode_journaled(frame(first + UNREADABLE + second))
    assert table is not None
    assert table["span_id"].to_pylist() == span_ids(first) + span_ids(second)
    assert "journal frame 7 no longer decodes whole: 2 of its 3 resources loaded" in caplog.text


def test_a_frame_that_decodes_is_loaded_as_it_is() -> None:
    payload = body(3) + body(1)
    table = decode_journaled(frame(payload))
    assert table is not None and table["span_id"].to_pylist() == span_ids(payload)


@pytest.mark.parametrize(
    ("payload", "encoding"),
    [(UNREADABLE, "protobuf"), (body(2)[:-1], "protobuf"), (b'{"resourceSpans": 1}', "json")],
)
def test_a_frame_that_cannot_be_split_is_skipped_and_said(
    payload: bytes, encoding: str, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.ERROR):
        assert decode_journaled(frame(payload, encoding)) is None
    assert "journal frame 7 no longer decodes, skipped" in caplog.text
