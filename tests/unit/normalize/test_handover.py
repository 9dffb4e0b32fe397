"""The hand-over to pyarrow through the Arrow PyCapsule interface: the decoder's schema is the
store's, column for column, and a batch exported while decoding can still be imported twice."""

from __future__ import annotations

import pyarrow as pa
import pytest

from collector.normalize import _native
from collector.store.tables import ARROW_SCHEMAS, SIGNAL_TABLES
from tests.support.otlp import logs_request, simple_spans, trace_request


@pytest.mark.parametrize("signal", ["traces", "logs"])
def test_the_decoders_schema_is_the_stores(signal: str) -> None:
    if signal == "traces":
        request = trace_request(simple_spans(3))
    else:
        request = logs_request([{"body": "a"}, {"body": "b"}])
    batch = _native.decode(signal, "protobuf", request.SerializeToString(), 100)[0]
    assert batch is not None
    carried = pa.record_batch(batch).schema  # through the PyCapsule interface, with its schema
    assert carried.equals(ARROW_SCHEMAS[SIGNAL_TABLES[signal]], check_metadata=True)


def test_a_batch_can_be_imported_again_after_the_first_hand_over() -> None:
    """The first import takes the structs made while decoding; a second one gets new ones."""
    body = trace_request(simple_spans(2)).SerializeToString()
    batch = _native.decode("traces", "protobuf", body, 100)[0]
    assert batch is not None
    first, second = pa.record_batch(batch), pa.record_batch(batch)
    assert first.num_rows == 2
    assert first.equals(second)
