"""Fuzz target: libFuzzer's mutations of the captures (OTLP/JSON and protobuf) through the native
decoder and the reference decoder (protobuf's parse and the Python normalization it replaced):
both accept or both refuse, and every count and column agrees.
Run: python tests/fuzz/fuzz_differential.py CORPUS_DIR -runs=N"""

from __future__ import annotations

import sys

import atheris
import duckdb  # noqa: F401
import grpc  # noqa: F401  (third-party code imported uninstrumented: only ours is traced)
import pyarrow  # noqa: F401
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2  # noqa: F401

with atheris.instrument_imports():
    from tests.fuzz.differential import differences


def test_one_input(data: bytes) -> None:
    encoding = "json" if data[:1] in (b"{", b" ", b"\n") else "protobuf"
    found = differences("traces", encoding, data, 256)
    assert not found, found[:3]


if __name__ == "__main__":
    atheris.Setup(sys.argv, test_one_input)
    atheris.Fuzz()
