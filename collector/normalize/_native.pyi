"""The Rust extension (Cargo.toml, collector/native/): the native hot path."""

from typing import Any

class ArrowBatch:
    """The decoded columns as one Arrow struct array."""

    def __arrow_c_array__(self, requested_schema: Any = None) -> tuple[Any, Any]:
        """The Arrow PyCapsule interface: ("arrow_schema", "arrow_array") capsules."""

    def __len__(self) -> int: ...

def decode(
    signal: str, encoding: str, data: bytes, max_attribute_length: int
) -> tuple[ArrowBatch | None, int, dict[str, int], int, dict[str, int], list[str]]:
    """One OTLP export request ("traces" or "logs"; "protobuf" or "json") to the store's batch
    columns: (the batch or None, rows, rejected by reason, truncated rows, rejected by
    service.name, ignored top-level JSON keys). Raises ValueError on bad bytes."""
