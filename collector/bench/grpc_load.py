"""A gRPC unary load from native threads (collector/native/grpc_load.rs), for the benchmarks
whose load generator shares the cores it measures: its calls and their outcomes, typed."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from urllib.parse import urlsplit

import grpc

from collector.bench.traces import Restamp
from collector.normalize.native import native

# gRPC status codes by number, named as grpcio names them (errors are counted by name).
CODE_NAMES = {code.value[0]: code.name for code in grpc.StatusCode}


def code_name(code: int) -> str:
    """`UNAUTHENTICATED` for 16, as `grpc.StatusCode(...).name`."""
    return CODE_NAMES.get(code, str(code))


@dataclass(frozen=True)
class LoadRun:
    """What a load did: each call, in the order they were due, as (seconds from when it was due,
    gRPC status code, 0 for OK, message, the answer's bytes, or its rejected spans with
    `rejected_spans`, None when it failed); refusals retried after the wait they asked for; and the
    code of each refusal a sender gave up on because that wait outlasted the run (that sender then
    stopped)."""

    calls: list[tuple[float, int, str, bytes | int | None]]
    retried: int
    gave_up: list[int]


def fresh_copies(template: bytes, salt: bytes, restamp: Restamp) -> native.FreshCopies:
    """The native copier of an OTLP/protobuf template: `salted_copy` then `restamp.fresh`."""
    offsets = restamp.at[:, 0].tolist()  # where each time's 8 bytes begin
    return native.FreshCopies(template, salt, offsets, restamp.values.tolist(), restamp.made_ns)


def grpc_load(
    endpoint: str,
    method: str,
    *,
    bodies: Sequence[bytes] | None = None,
    template: native.FreshCopies | None = None,
    connections: int = 1,
    in_flight: int = 1,
    duration: float,
    requests: int = 0,
    rate: float = 0.0,
    headers: Mapping[str, str] | None = None,
    timeout: float = 10.0,
    retry: bool = False,
    rejected_spans: bool = False,
    threads: int = 1,
) -> LoadRun:
    """Call `method` at `endpoint` (HOST:PORT or a URL, plaintext HTTP/2) for `duration`
    seconds or `requests` calls (0: no budget), closed loop or at `rate` calls a second (open
    loop: call n due at start + n / rate, its latency counted from then), `in_flight` calls at
    a time on each of `connections` connections. Each call sends the next of `bodies` in turn
    or a fresh copy of `template`. With `retry`, a refusal that says when (RetryInfo;
    UNAVAILABLE) is sent again after that wait, as OpenTelemetry SDK exporters do. Blocks
    until the last call ends (Ctrl-C raises KeyboardInterrupt); the GIL is released. The calls
    run on the calling thread, or on `threads` threads of their own when more than one."""
    target = urlsplit(endpoint).netloc if "://" in endpoint else endpoint
    calls, retried, gave_up = native.grpc_load(
        f"http://{target}",
        method,
        bodies=list(bodies) if bodies is not None else None,
        template=template,
        connections=connections,
        in_flight=in_flight,
        duration=duration,
        requests=requests,
        rate=rate,
        headers=list((headers or {}).items()),
        timeout=timeout,
        retry=retry,
        rejected_spans=rejected_spans,
        threads=threads,
    )
    return LoadRun(calls, retried, gave_up)
