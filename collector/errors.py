"""Permanent vs transient errors and the one place that maps them to gRPC and HTTP statuses."""

from __future__ import annotations

import grpc


class SextantError(Exception):
    """Base of the errors Sextant raises on purpose."""


class ConfigError(SextantError):
    """The configuration cannot be used; the message names the key and the reason."""


class StartupError(SextantError):
    """A component could not start (a port in use, a store that cannot be opened)."""


class PermanentError(SextantError):
    """Bad input: retrying the same request can never succeed."""

    grpc_code = grpc.StatusCode.INVALID_ARGUMENT
    http_status = 400


class MalformedRequest(PermanentError):
    pass


class Unauthenticated(PermanentError):
    grpc_code = grpc.StatusCode.UNAUTHENTICATED
    http_status = 401


class RequestTooLarge(PermanentError):
    grpc_code = grpc.StatusCode.RESOURCE_EXHAUSTED
    http_status = 413


class UnsupportedMediaType(PermanentError):
    http_status = 415


class TransientError(SextantError):
    """The request was fine but cannot be taken now; the client should retry after a while."""

    grpc_code = grpc.StatusCode.UNAVAILABLE
    http_status = 503
    retry_after_seconds = 1


class Overloaded(TransientError):
    """The write queue is full: back-pressure, not loss."""

    grpc_code = grpc.StatusCode.RESOURCE_EXHAUSTED


class StoreUnavailable(TransientError):
    """The store could not commit the request's rows; nothing of it was acknowledged."""


class ShuttingDown(TransientError):
    pass


def status_label(error: BaseException | None) -> str:
    """A short, bounded label for the `status` metric label."""
    if error is None:
        return "ok"
    if isinstance(error, SextantError):
        name = type(error).__name__
        return "".join("_" + c.lower() if c.isupper() else c for c in name).lstrip("_")
    return "internal"
