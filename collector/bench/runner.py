"""Drive an OTLP endpoint with synthetic agent traces from N exporters and report what it took."""

from __future__ import annotations

import http.client
import statistics
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from urllib.parse import urlsplit

import grpc
import orjson
from google.protobuf import json_format
from google.rpc import error_details_pb2, status_pb2
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

from collector.bench.grpc_load import code_name, fresh_copies, grpc_load
from collector.bench.traces import Restamp, salted_copy, salted_template

EXPORT_METHOD = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"
REQUEST_TIMEOUT = 10.0


@dataclass(frozen=True)
class BenchOptions:
    endpoint: str = "localhost:4317"
    protocol: str = "grpc"
    concurrency: int = 4
    duration: float = 10.0
    traces: int = 0
    spans_per_request: int = 512
    spans_per_trace: int = 10
    rate: float = 0.0  # spans/s to offer; 0 = as fast as the endpoint answers
    headers: dict[str, str] = field(default_factory=dict)
    # Retry a refusal that says when (RetryInfo, Retry-After) after that wait, as OpenTelemetry
    # SDK exporters do, rather than count it failed and send the next request at once.
    retry: bool = False
    # Over gRPC: "native" (collector/bench/grpc_load.py, a fraction of the CPU: the load shares
    # the cores it measures) or "grpcio" (a Python thread an exporter, the `Sender` below).
    client: str = "native"


@dataclass
class BenchReport:
    options: BenchOptions
    elapsed: float = 0.0
    requests_ok: int = 0
    spans_sent: int = 0
    spans_accepted: int = 0
    latencies: list[float] = field(default_factory=list)
    errors: Counter[str] = field(default_factory=Counter)
    retried: int = 0  # refusals retried after the wait they asked for (with `retry`)
    request_bytes: int = 0
    spans_per_request: int = 0  # as sent: whole traces only

    def percentile(self, q: float) -> float:
        if not self.latencies:
            return float("nan")
        if len(self.latencies) == 1:
            return self.latencies[0]
        return statistics.quantiles(self.latencies, n=1000, method="inclusive")[int(q * 10) - 1]

    def summary(self) -> dict[str, float | int | str | None]:
        """The figures of `render` as one flat record (for JSON and CSV)."""
        o = self.options
        return {
            "endpoint": o.endpoint,
            "protocol": o.protocol,
            "concurrency": o.concurrency,
            "spans_per_request": self.spans_per_request or o.spans_per_request,
            "request_bytes": self.request_bytes,
            "duration_s": round(self.elapsed, 3),
            "requests_ok": self.requests_ok,
            "requests_failed": sum(self.errors.values()),
            "requests_retried": self.retried,
            "spans_sent": self.spans_sent,
            "spans_accepted": self.spans_accepted,
            "spans_per_s": round(self.spans_accepted / self.elapsed, 1) if self.elapsed else 0.0,
            # none (null) when no request succeeded: there is no latency to give
            "latency_p50_ms": round(self.percentile(50) * 1000, 3) if self.latencies else None,
            "latency_p99_ms": round(self.percentile(99) * 1000, 3) if self.latencies else None,
        }

    def render(self) -> str:
        o = self.options
        spans = self.spans_per_request or o.spans_per_request
        rate = self.spans_accepted / self.elapsed if self.elapsed else 0.0
        lines = [
            f"endpoint          {o.endpoint} ({o.protocol}), concurrency {o.concurrency}",
            f"request size      {spans} spans, {self.request_bytes} bytes"
            f" ({self.request_bytes / max(spans, 1):.0f} bytes/span)",
            f"duration          {self.elapsed:.1f} s",
            f"requests          {self.requests_ok} ok, {sum(self.errors.values())} failed,"
            f" {self.retried} refusals retried",
            f"spans accepted    {self.spans_accepted} of {self.spans_sent} sent",
            f"accepted spans/s  {rate:,.0f}",
            f"export latency    p50 {self.percentile(50) * 1000:.1f} ms,"
            f" p99 {self.percentile(99) * 1000:.1f} ms"
            if self.latencies
            else "export latency    none: every request failed (see the errors below)",
        ]
        for error, count in self.errors.most_common():
            lines.append(f"error             {count} x {error}")
        return "\n".join(lines)


class Throttled(Exception):
    """A retryable refusal that says how long to wait (OTLP throttling)."""

    def __init__(self, what: str, delay: float) -> None:
        super().__init__(what)
        self.delay = delay


def grpc_retry_delay(exc: grpc.RpcError) -> float | None:
    """The RetryInfo delay of a refusal an OTLP exporter retries (RESOURCE_EXHAUSTED with
    RetryInfo, UNAVAILABLE), or None."""
    code = exc.code() if isinstance(exc, grpc.Call) else None
    if code not in (grpc.StatusCode.RESOURCE_EXHAUSTED, grpc.StatusCode.UNAVAILABLE):
        return None
    assert isinstance(exc, grpc.Call)
    for key, value in exc.trailing_metadata() or ():
        if key == "grpc-status-details-bin":
            status = status_pb2.Status.FromString(value)
            for detail in status.details:
                info = error_details_pb2.RetryInfo()
                if detail.Unpack(info):
                    return info.retry_delay.ToTimedelta().total_seconds()
    return 1.0 if code == grpc.StatusCode.UNAVAILABLE else None


class Sender:
    """One connection; sends a serialized request and returns how many spans were rejected."""

    def __init__(self, options: BenchOptions) -> None:
        self.options = options
        endpoint = options.endpoint
        if options.protocol == "grpc":
            target = urlsplit(endpoint).netloc if "://" in endpoint else endpoint
            self.channel = grpc.insecure_channel(target)
            self.call = self.channel.unary_unary(EXPORT_METHOD)
            self.metadata = tuple((k.lower(), v) for k, v in options.headers.items())
        else:
            url = urlsplit(endpoint if "://" in endpoint else f"http://{endpoint}")
            self.path = url.path if url.path not in ("", "/") else "/v1/traces"
            self.conn = http.client.HTTPConnection(url.netloc, timeout=REQUEST_TIMEOUT)
            json_body = options.protocol == "http/json"
            self.headers = {
                "Content-Type": "application/json" if json_body else "application/x-protobuf",
                **options.headers,
            }

    def send(self, payload: bytes) -> int:
        if self.options.protocol == "grpc":
            reply = self.call(payload, timeout=REQUEST_TIMEOUT, metadata=self.metadata)
            return ExportTraceServiceResponse.FromString(reply).partial_success.rejected_spans
        self.conn.request("POST", self.path, body=payload, headers=self.headers)
        response = self.conn.getresponse()
        body = response.read()
        retry_after = response.getheader("Retry-After")
        if response.status in (429, 503) and retry_after and retry_after.isdigit():
            raise Throttled(f"HTTP {response.status}", float(retry_after))
        if response.status != 200:
            raise RuntimeError(f"HTTP {response.status}")
        if self.options.protocol == "http/json":
            rejected = orjson.loads(body).get("partialSuccess", {}).get("rejectedSpans", 0)
            return int(rejected)
        return ExportTraceServiceResponse.FromString(body).partial_success.rejected_spans

    def close(self) -> None:
        if self.options.protocol == "grpc":
            self.channel.close()
        else:
            self.conn.close()


def payload_template(options: BenchOptions) -> tuple[bytes, bytes, int]:
    """(serialized request, salt to replace, spans per request) in the chosen encoding."""
    request, salt = salted_template(options.spans_per_request, options.spans_per_trace)
    spans = sum(len(ss.spans) for rs in request.resource_spans for ss in rs.scope_spans)
    if options.protocol != "http/json":
        return request.SerializeToString(), salt, spans
    doc = json_format.MessageToDict(request, use_integers_for_enums=True)
    for rs in doc["resourceSpans"]:
        for ss in rs["scopeSpans"]:
            for span in ss["spans"]:
                for key in ("traceId", "spanId", "parentSpanId"):
                    if key in span:
                        span[key] = bytes(__import__("base64").b64decode(span[key])).hex()
    return orjson.dumps(doc), salt.hex().encode(), spans


def request_budget(options: BenchOptions, traces_per_request: int) -> int | None:
    """Requests to send for `options.traces` (None: as many as the duration allows)."""
    return -(-options.traces // traces_per_request) if options.traces else None


class Schedule:
    """Which request goes next, shared by the sending threads: a budget of requests when
    --traces is given, and with --rate the moment each request may leave (open loop)."""

    def __init__(self, options: BenchOptions, spans: int, traces_per_request: int) -> None:
        self.lock = threading.Lock()
        self.started_at = time.monotonic()
        self.deadline = self.started_at + options.duration
        self.budget = request_budget(options, traces_per_request)
        self.slot = 0
        self.interval = spans / options.rate if options.rate else 0.0

    def next(self) -> bool:
        """Wait for the next request's turn; False when the run is over."""
        if time.monotonic() >= self.deadline:
            return False
        with self.lock:
            if self.budget is not None:
                if self.budget <= 0:
                    return False
                self.budget -= 1
            slot = self.slot
            self.slot += 1
        if self.interval:  # open loop: request n leaves at start + n * interval
            pause = self.started_at + slot * self.interval - time.monotonic()
            if pause > 0:
                time.sleep(pause)
            return time.monotonic() < self.deadline
        return True


def send_until_done(
    options: BenchOptions,
    schedule: Schedule,
    report: BenchReport,
    payload: tuple[bytes, bytes, Restamp],
) -> None:
    """One thread's loop: send fresh copies of the template (new trace ids, times of the
    moment), count what came back."""
    template, salt, restamp = payload
    spans = report.spans_per_request
    sender = Sender(options)
    latencies: list[float] = []
    try:
        while schedule.next():
            started = time.perf_counter()
            try:
                fresh = restamp.fresh(salted_copy(template, salt), time.time_ns())
                rejected = send_retrying(sender, fresh, (options, schedule, report))
            except Throttled as exc:  # refused, and the wait it asked for outlasts the run
                # This exporter is done: sending a fresh request at once would only be refused
                # again, and a loop of those in the last second counted hundreds of "failed"
                # exports that an SDK exporter, waiting as told, would have delivered.
                with schedule.lock:
                    report.errors[f"{exc} (refused until the end)"] += 1
                    report.spans_sent += spans
                break
            except grpc.RpcError as exc:
                with schedule.lock:
                    report.errors[f"gRPC {exc.code().name}"] += 1
                    report.spans_sent += spans
                continue
            except (OSError, RuntimeError, http.client.HTTPException) as exc:
                with schedule.lock:
                    report.errors[str(exc) or type(exc).__name__] += 1
                    report.spans_sent += spans
                sender.close()
                sender = Sender(options)
                continue
            latencies.append(time.perf_counter() - started)
            with schedule.lock:
                report.requests_ok += 1
                report.spans_sent += spans
                report.spans_accepted += spans - rejected
    finally:
        sender.close()
        with schedule.lock:
            report.latencies.extend(latencies)


def send_retrying(
    sender: Sender, payload: bytes, run: tuple[BenchOptions, Schedule, BenchReport]
) -> int:
    """Send one request; with `retry`, a throttled one again after the wait it was told,
    until the run ends."""
    options, schedule, report = run
    while True:
        try:
            return sender.send(payload)
        except grpc.RpcError as exc:
            delay = grpc_retry_delay(exc) if options.retry else None
            if delay is None:
                raise
            throttled = Throttled(f"gRPC {exc.code().name}", delay)
        except Throttled as exc:
            if not options.retry:
                raise RuntimeError(str(exc)) from None
            throttled = exc
        if time.monotonic() + throttled.delay >= schedule.deadline:
            raise throttled
        with schedule.lock:
            report.retried += 1
        time.sleep(throttled.delay)


def run_bench(options: BenchOptions, on_start: Callable[[], object] | None = None) -> BenchReport:
    """Send for `options.duration`; `on_start` is called once the sending threads run (so
    whoever watches the endpoint knows when the load began: the template takes a while)."""
    made_ns = time.time_ns()
    template, salt, spans = payload_template(options)
    restamp = Restamp(template, made_ns, as_json=options.protocol == "http/json")
    report = BenchReport(options, request_bytes=len(template), spans_per_request=spans)
    if options.protocol == "grpc" and options.client == "native":
        return send_natively(options, report, (template, salt, restamp), on_start)
    schedule = Schedule(options, spans, max(1, spans // options.spans_per_trace))
    threads = [
        threading.Thread(
            target=send_until_done,
            args=(options, schedule, report, (template, salt, restamp)),
            daemon=True,
        )
        for _ in range(options.concurrency)
    ]
    started = time.monotonic()
    for t in threads:
        t.start()
    if on_start is not None:
        on_start()
    for t in threads:
        t.join(options.duration + REQUEST_TIMEOUT + 5)
    report.elapsed = time.monotonic() - started
    return report


def send_natively(
    options: BenchOptions,
    report: BenchReport,
    payload: tuple[bytes, bytes, Restamp],
    on_start: Callable[[], object] | None,
) -> BenchReport:
    """The same load from the native gRPC client, counted as `send_until_done` counts: an
    exporter a connection, one request in flight on each; open loop, a request's latency
    counts from when it was due."""
    spans = report.spans_per_request
    budget = request_budget(options, max(1, spans // options.spans_per_trace))
    started = time.monotonic()
    if on_start is not None:
        on_start()
    run = grpc_load(
        options.endpoint,
        EXPORT_METHOD,
        template=fresh_copies(*payload),
        connections=options.concurrency,
        duration=options.duration,
        requests=budget or 0,
        rate=options.rate / spans if options.rate else 0.0,
        headers=options.headers,
        timeout=REQUEST_TIMEOUT,
        retry=options.retry,
        rejected_spans=True,
    )
    report.elapsed = time.monotonic() - started
    for latency, code, _, rejected in run.calls:
        if code:
            report.errors[f"gRPC {code_name(code)}"] += 1
        elif isinstance(rejected, int):  # the answer's partial_success.rejected_spans
            report.requests_ok += 1
            report.spans_accepted += spans - rejected
            report.latencies.append(latency)
    for code in run.gave_up:
        report.errors[f"gRPC {code_name(code)} (refused until the end)"] += 1
    report.spans_sent = spans * (len(run.calls) + len(run.gave_up))
    report.retried = run.retried
    return report
