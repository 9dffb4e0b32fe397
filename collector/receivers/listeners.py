"""Which server each OTLP listener runs on: the native ones by default, Python's for TLS."""

from __future__ import annotations

from collector.auth import BearerAuth
from collector.config import SextantConfig
from collector.guard.service import Guard
from collector.receivers.ingest import Ingest
from collector.receivers.metrics import ReceiverMetrics
from collector.receivers.native_grpc import NativeGrpcReceiver
from collector.receivers.native_http import NativeHttpReceiver
from collector.receivers.otlp_grpc import OtlpGrpcReceiver
from collector.receivers.otlp_http import OtlpHttpReceiver, OtlpHttpRoutes

GrpcListener = OtlpGrpcReceiver | NativeGrpcReceiver
HttpListener = OtlpHttpReceiver | NativeHttpReceiver


def otlp_listeners(
    config: SextantConfig,
    auth: BearerAuth,
    ingest: Ingest,
    metrics: ReceiverMetrics,
    grace: float,
    guard: Guard | None,
) -> tuple[GrpcListener, HttpListener]:
    """The OTLP/gRPC and OTLP/HTTP receivers, not started."""
    native = config.grpc.server == "native" and config.grpc.tls is None
    kind = NativeGrpcReceiver if native else OtlpGrpcReceiver
    grpc = kind(config.grpc, config.limits, auth, ingest, metrics, guard)
    routes = OtlpHttpRoutes(config.limits, auth, ingest, metrics, guard)
    http: HttpListener
    if config.http.server == "native" and config.http.tls is None:
        http = NativeHttpReceiver(config.http, routes)
    else:
        http = OtlpHttpReceiver(config.http, routes, grace)
    return grpc, http
