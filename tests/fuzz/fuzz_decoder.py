"""Fuzz target: any bytes through the trace decoder (OTLP/JSON or protobuf) either are refused
as bad input (a PermanentError, the receivers' 400 / INVALID_ARGUMENT) or become rows of the
store's span schema. Run: python tests/fuzz/fuzz_decoder.py CORPUS_DIR -runs=N"""

from __future__ import annotations

import sys

import atheris
import duckdb  # noqa: F401
import grpc  # noqa: F401  (third-party code imported uninstrumented: only ours is traced)
import pyarrow  # noqa: F401
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2  # noqa: F401

with atheris.instrument_imports():
    from collector.errors import PermanentError
    from collector.normalize.wire import decode_request
    from collector.store.tables import ARROW_SCHEMAS


def test_one_input(data: bytes) -> None:
    encoding = "json" if data[:1] in (b"{", b" ", b"\n") else "protobuf"
    try:
        decoded = decode_request("traces", encoding, data, 4096)
    except PermanentError:
        return
    if decoded.table is not None:
        assert decoded.table.schema == ARROW_SCHEMAS["spans"]
        assert decoded.table.num_rows == decoded.rows


if __name__ == "__main__":
    atheris.Setup(sys.argv, test_one_input)
    atheris.Fuzz()
