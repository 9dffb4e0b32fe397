"""An HTTP/1.1 POST load from native threads (collector/native/http_load.rs), for the guard
benchmark over OTLP/HTTP, whose client shares the cores it measures."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from collector.normalize.native import native


def http_load(
    address: str,
    path: str,
    *,
    bodies: Sequence[bytes],
    connections: int = 1,
    duration: float,
    requests: int = 0,
    rate: float = 0.0,
    headers: Mapping[str, str] | None = None,
    timeout: float = 10.0,
    threads: int = 1,
) -> list[tuple[float, int, str, bytes | None]]:
    """POST `bodies` in turn to `path` at `address` (HOST:PORT, plaintext) for `duration` seconds or
    `requests` calls (0: no budget), closed loop or at `rate` calls a second (open loop: call n due
    at start + n / rate, its latency counted from then), over `connections` keep-alive connections,
    one call at a time on each (a call due while all are busy waits for one, and the wait counts).
    Each call, in the order they were due, as (seconds from when it was due, HTTP status or 0 when
    no answer came, why not, the answer's body or None). Blocks until the last call ends (Ctrl-C
    raises KeyboardInterrupt); the GIL is released."""
    return native.http_load(
        address,
        path,
        bodies=list(bodies),
        connections=connections,
        duration=duration,
        requests=requests,
        rate=rate,
        headers=list((headers or {}).items()),
        timeout=timeout,
        threads=threads,
    )
