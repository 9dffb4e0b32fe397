"""One request's wire bytes to an Arrow batch: the unit of work a decode worker process runs."""

from __future__ import annotations

from collector.normalize.wire import Decoded
from collector.store.tables import SIGNAL_TABLES, arrow_batch
from tests.support.reference.decode import Batch, decode_logs, decode_spans
from tests.support.reference.otlp_json import logs_from_json, traces_from_json
from tests.support.reference.otlp_protobuf import logs_from_protobuf, traces_from_protobuf

PARSERS = {
    ("traces", "protobuf"): traces_from_protobuf,
    ("logs", "protobuf"): logs_from_protobuf,
}
JSON_PARSERS = {"traces": traces_from_json, "logs": logs_from_json}


def decode_request(signal: str, encoding: str, data: bytes, max_attribute_length: int) -> Decoded:
    """Parse, validate and normalize one export request; raises MalformedRequest on bad bytes."""
    ignored: list[str] = []
    if encoding == "json":
        request = JSON_PARSERS[signal](data, ignored)
    else:
        request = PARSERS[signal, encoding](data)
    decode = decode_spans if signal == "traces" else decode_logs
    batch: Batch = decode(request, max_attribute_length)
    table = arrow_batch(SIGNAL_TABLES[signal], batch.columns) if batch.rows else None
    return Decoded(
        table,
        batch.rows,
        dict(batch.rejected),
        batch.truncated_rows,
        dict(batch.rejected_by_service),
        tuple(ignored),
    )
