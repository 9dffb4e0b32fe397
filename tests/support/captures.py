"""Sending the recorded OTLP captures (tests/testdata/otlp-captures and otlp-multi) to a running
server as a real client does: OTLP/JSON over HTTP, or protobuf over gRPC."""

from __future__ import annotations

import json
from pathlib import Path

import grpc
import requests

from tests.support.otlp import TRACE_EXPORT
from tests.support.paths import TESTDATA
from tests.support.reference.otlp_json import traces_from_json
from tests.support.server import RunningServer

CAPTURES = TESTDATA / "otlp-captures"


def expected_for(path: Path) -> dict:
    stem = path.name.removesuffix(".otlp.json").removesuffix(".body.json")
    return json.loads((CAPTURES / f"{stem}.expected.json").read_text())


def send(server: RunningServer, path: Path, transport: str) -> None:
    body = path.read_bytes()
    if transport == "http/json":
        reply = requests.post(
            f"{server.http_url}/v1/traces",
            data=body,
            headers={"Content-Type": "application/json"},
            timeout=10,
        )
        assert reply.status_code == 200, reply.text
        assert "partialSuccess" not in reply.json()
    else:
        with grpc.insecure_channel(server.grpc_endpoint) as channel:
            channel.unary_unary(TRACE_EXPORT)(traces_from_json(body).SerializeToString())
