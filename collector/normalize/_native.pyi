"""The Rust extension (Cargo.toml, collector/native/): the native hot path."""

from typing import Any

def decode(
    signal: str, encoding: str, data: bytes, max_attribute_length: int
) -> tuple[Any | None, int, dict[str, int], int, dict[str, int], list[str]]:
    """One OTLP export request ("traces" or "logs"; "protobuf" or "json") to the store's batch
    columns: (an Arrow PyCapsule batch or None, rows, rejected by reason, truncated rows,
    rejected by service.name, ignored top-level JSON keys). Raises ValueError on bad bytes."""
