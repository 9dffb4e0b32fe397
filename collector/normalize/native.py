"""The native extension's entry points beyond decoding (the rule interpreter, the trajectory
builder, the OTLP/gRPC listener): one public door to `_native` for the packages that call it."""

from __future__ import annotations

from collector.normalize import _native

native = _native

__all__ = ["native"]
