"""OTLP export requests sent to another backend, one at a time, over gRPC or HTTP/protobuf:
what re-sending stored spans and the gen_ai evaluation events out both go through, with the
attribute encoding (JSON values back to OTLP `AnyValue`) they share."""

from __future__ import annotations

import urllib.error
import urllib.request
from typing import Any

import grpc
from google.protobuf.message import Message
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue

from collector.errors import SextantError
from collector.outbound import opener
from collector.redact import header_secrets, redact, shown_url, url_secrets


def any_value(value: Any) -> AnyValue:
    """The inverse of the store's attribute JSON (bytes were kept as base64 text, and stay so)."""
    if isinstance(value, bool):
        return AnyValue(bool_value=value)
    if isinstance(value, int):
        return AnyValue(int_value=value)
    if isinstance(value, float):
        return AnyValue(double_value=value)
    if isinstance(value, str):
        return AnyValue(string_value=value)
    if isinstance(value, bytes):
        return AnyValue(bytes_value=value)
    out = AnyValue()
    if isinstance(value, list):
        out.array_value.values.extend(any_value(v) for v in value)
    elif isinstance(value, dict):
        out.kvlist_value.values.extend(key_values(value))
    return out


def key_values(attributes: dict[str, Any] | None) -> list[KeyValue]:
    return [KeyValue(key=k, value=any_value(v)) for k, v in (attributes or {}).items()]


GRPC_EXPORTS = {
    "traces": "/opentelemetry.proto.collector.trace.v1.TraceService/Export",
    "logs": "/opentelemetry.proto.collector.logs.v1.LogsService/Export",
}
# What OTLP says a client may retry (the rest is refused for good).
RETRYABLE_GRPC = {"CANCELLED", "DEADLINE_EXCEEDED", "ABORTED", "OUT_OF_RANGE", "UNAVAILABLE",
                  "DATA_LOSS", "RESOURCE_EXHAUSTED"}  # fmt: skip
RETRYABLE_HTTP = {429, 502, 503, 504}


class SendError(SextantError):
    def __init__(self, message: str, retryable: bool) -> None:
        super().__init__(message)
        self.retryable = retryable


class Sender:
    """One OTLP export request at a time, over gRPC or HTTP/protobuf, for traces or logs."""

    def __init__(
        self, endpoint: str, protocol: str, headers: dict[str, str], signal: str = "traces"
    ) -> None:
        self.endpoint = endpoint
        self.protocol = protocol
        self.headers = headers
        if protocol == "grpc":
            target = endpoint.split("://", 1)[-1].rstrip("/")
            self.channel = grpc.insecure_channel(target)
            self.export = self.channel.unary_unary(GRPC_EXPORTS[signal])
        else:
            url = endpoint if "://" in endpoint else f"http://{endpoint}"
            path = f"/v1/{signal}"
            self.url = url if url.rstrip("/").endswith(path) else url.rstrip("/") + path

    def send(self, request: Message, timeout: float = 30) -> None:
        """Send it; a SendError says whether trying again may succeed."""
        body = request.SerializeToString()
        if self.protocol == "grpc":
            try:
                self.export(body, metadata=list(self.headers.items()), timeout=timeout)
            except grpc.RpcError as exc:
                code = exc.code().name
                message = f"{shown_url(self.endpoint)}: {code}: {exc.details()}"
                raise SendError(self._redacted(message), code in RETRYABLE_GRPC) from exc
            return
        headers = {"Content-Type": "application/x-protobuf", **self.headers}
        request_ = urllib.request.Request(self.url, body, headers, method="POST")
        try:
            # Redirects to another origin are refused: urllib would send the configured
            # headers (API keys) on to whatever host the answer names.
            with opener().open(request_, timeout=timeout) as reply:
                reply.read()
        except urllib.error.HTTPError as exc:
            message = f"{shown_url(self.url)}: HTTP {exc.code}: {exc.reason}: {exc.read()[:300]!r}"
            raise SendError(self._redacted(message), exc.code in RETRYABLE_HTTP) from exc
        except urllib.error.URLError as exc:
            message = f"cannot reach {shown_url(self.url)}: {exc.reason}"
            raise SendError(self._redacted(message), True) from exc

    def _redacted(self, text: str) -> str:
        """Error text without the configured header values: a server may echo its request."""
        secrets = [*self.headers.values(), *header_secrets(self.headers)]
        return redact(text, [*secrets, *url_secrets(self.url if self.protocol != "grpc" else "")])

    def close(self) -> None:
        if self.protocol == "grpc":
            self.channel.close()
