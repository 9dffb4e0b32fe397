"""Sending the recorded OTLP captures (tests/testdata/otlp-captures and otlp-multi) to a running
server as a real client does: OTLP/JSON over HTTP, or protobuf over gRPC."""

from __future__ import annotations

import json
import re
import secrets
from pathlib import Path

import grpc
import requests

from tests.support.otlp import TRACE_EXPORT
from tests.support.paths import TESTDATA
from tests.support.reference.otlp_json import traces_from_json
from tests.support.server import RunningServer

CAPTURES = TESTDATA / "otlp-captures"
TRACE_ID = re.compile(rb'"traceId"\s*:\s*"([0-9a-fA-F]{32})"')


def expected_for(path: Path) -> dict:
    stem = path.name.removesuffix(".otlp.json").removesuffix(".body.json")
    return json.loads((CAPTURES / f"{stem}.expected.json").read_text())


def moved(body: bytes, by_ns: int) -> bytes:
    """OTLP/JSON with every span's and span event's time moved by `by_ns`: a capture kept
    where it stood against the clock, for a test that looks back from now."""
    data = json.loads(body)
    for resource in data.get("resourceSpans", []):
        for scope in resource.get("scopeSpans", []):
            for span in scope.get("spans", []):
                for item in (span, *span.get("events", [])):
                    for key in ("startTimeUnixNano", "endTimeUnixNano", "timeUnixNano"):
                        if key in item:
                            item[key] = str(int(item[key]) + by_ns)
    return json.dumps(data).encode()


def send(server: RunningServer, path: Path, transport: str, body: bytes | None = None) -> None:
    """The capture at `path` (or `body`, OTLP/JSON) as a client with the server's token sends it."""
    body = path.read_bytes() if body is None else body
    if transport == "http/json":
        reply = requests.post(
            f"{server.http_url}/v1/traces",
            data=body,
            headers={"Content-Type": "application/json", **server.auth_headers},
            timeout=10,
        )
        assert reply.status_code == 200, reply.text
        assert "partialSuccess" not in reply.json()
    else:
        metadata = [(k.lower(), v) for k, v in server.auth_headers.items()]
        with grpc.insecure_channel(server.grpc_endpoint) as channel:
            export = channel.unary_unary(TRACE_EXPORT)
            export(traces_from_json(body).SerializeToString(), metadata=metadata)


def with_new_trace_ids(body: bytes) -> tuple[bytes, list[str]]:
    """An OTLP/JSON capture as another run of the same agent: each trace id replaced by a fresh
    one (the same one wherever it recurs); the new ids, in the order first seen."""
    fresh: dict[str, str] = {}

    def new_id(match: re.Match[bytes]) -> bytes:
        old = match.group(1).decode()
        fresh.setdefault(old, secrets.token_hex(16))
        return b'"traceId":"' + fresh[old].encode() + b'"'

    return TRACE_ID.sub(new_id, body), list(fresh.values())
