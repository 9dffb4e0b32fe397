"""The Rust extension (Cargo.toml, collector/native/): the native hot path."""

from collections.abc import Callable
from typing import Any

class ArrowBatch:
    """Rows as one Arrow struct array: a request's decoded columns, a built round's table, a
    round's results (the `results` columns, and `deferred`)."""

    def __arrow_c_array__(self, requested_schema: Any = None) -> tuple[Any, Any]:
        """The Arrow PyCapsule interface: ("arrow_schema", "arrow_array") capsules."""

    def __len__(self) -> int: ...

class GrpcServer:
    """The OTLP/gRPC listener in native threads (grpc_server.rs); calls reach Python through
    take() after a byte on the wake pipe, answers go back through reply()."""

    port: int

    def __init__(
        self,
        host: str,
        port: int,
        threads: int,
        wake_fd: int,
        guard: bool,
        max_request_bytes: int,
        max_response_bytes: int,
    ) -> None: ...
    def take(
        self,
    ) -> list[tuple[int, int, bytes, str | None, str | None, str, float]]:
        """(id, method: 0 traces, 1 logs, 2 guard, body, authorization, user agent, peer,
        seconds since it arrived) of each call since the last take."""
    def reply(
        self, id: int, code: int, body: bytes, message: str = "", details: bytes = b""
    ) -> None: ...
    def answer_guard_calls(self, runs: GuardRuns) -> None:
        """Answer GuardService/Check in the listener's threads for the runs `runs` keeps."""

    def stop(self) -> None: ...
    def stopped(self) -> bool: ...
    def close(self) -> None: ...

class HttpServer:
    """The OTLP/HTTP listener in native threads (http_server.rs); requests reach Python through
    take() after a byte on the wake pipe, answers go back through reply()."""

    port: int

    def __init__(
        self, host: str, port: int, threads: int, wake_fd: int, max_request_bytes: int
    ) -> None: ...
    def take(
        self,
    ) -> list[tuple[int, str, str, list[tuple[str, str]], bytes | None, str, float]]:
        """(id, method, path, headers, body or None past the size limit, peer address, seconds
        since it arrived) of each request since the last take."""
    def reply(self, id: int, status: int, headers: list[tuple[str, str]], body: bytes) -> None: ...
    def answer_guard_calls(self, runs: GuardRuns) -> None:
        """Answer POST /v1/guard in the listener's threads for the runs `runs` keeps."""

    def stop(self) -> None: ...
    def stopped(self) -> bool: ...
    def close(self) -> None: ...

class FreshCopies:
    """Fresh copies of an OTLP/protobuf export request (fresh_copy.rs): `salted_copy`, then
    `Restamp.fresh` (collector/bench/traces.py), byte for byte."""

    def __init__(
        self, template: bytes, salt: bytes, offsets: list[int], values: list[int], made_ns: int
    ) -> None:
        """`template` with raw `salt` (8 bytes) and the span times at `offsets` (fixed64,
        `values`), made at `made_ns`."""
    def copy(self, salt: bytes, now_ns: int) -> bytes:
        """A copy with `salt` (8 raw bytes, and its hex text) in place of the template's and
        its times moved by `now_ns - made_ns`."""
    def __len__(self) -> int: ...

def grpc_load(
    uri: str,
    method: str,
    *,
    bodies: list[bytes] | None = None,
    template: FreshCopies | None = None,
    connections: int = 1,
    in_flight: int = 1,
    duration: float,
    requests: int = 0,
    rate: float = 0.0,
    headers: list[tuple[str, str]] = ...,
    timeout: float = 10.0,
    retry: bool = False,
    rejected_spans: bool = False,
    threads: int = 1,
) -> tuple[list[tuple[float, int, str, bytes | int | None]], int, list[int]]:
    """A gRPC unary load with the GIL released (grpc_load.rs): (each call as (seconds from
    when it was due, status code, message, answer bytes or rejected spans or None), refusals
    retried, codes of the refusals senders gave up on). See collector/bench/grpc_load.py."""

def http_load(
    address: str,
    path: str,
    *,
    bodies: list[bytes],
    connections: int = 1,
    duration: float,
    requests: int = 0,
    rate: float = 0.0,
    headers: list[tuple[str, str]] = ...,
    timeout: float = 10.0,
    threads: int = 1,
) -> list[tuple[float, int, str, bytes | None]]:
    """An HTTP/1.1 POST load with the GIL released (http_load.rs): each call as (seconds from
    when it was due, HTTP status or 0, why not, the answer's body or None). See
    collector/bench/http_load.py."""

def distinct_rows(batch: Any, names: tuple[str, str, str]) -> list[tuple[str, str | None, str]]:
    """The distinct rows of three string columns of an Arrow record batch whose first and
    third cells are not null, in the order first seen."""

def guard_call_read(
    body: bytes, protobuf: bool
) -> tuple[str, str | None, str, str | None, str | None, str, str | None, str] | None:
    """A guard call's body as the native listeners read it (a gRPC CheckRequest, else a
    `POST /v1/guard` JSON body): (trace id, parent span, service, agent, version, tool, tool
    call id, arguments as compact JSON), or None when it is left to Python."""

def decode(
    signal: str, encoding: str, data: bytes, max_attribute_length: int
) -> tuple[ArrowBatch | None, int, dict[str, int], int, dict[str, int], list[str]]:
    """One OTLP export request ("traces" or "logs"; "protobuf" or "json") to the store's batch
    columns: (the batch or None, rows, rejected by reason, truncated rows, rejected by
    service.name, ignored top-level JSON keys). Raises ValueError on bad bytes."""

class SpanKeys:
    """The keys of recently stored spans, in two generations (collector/store/span_keys.py)."""

    rotations: int  # generations started so far, by `rotate` or by a full one

    def __init__(self, capacity: int) -> None:
        """Room for `capacity` keys a generation."""

    def seen(self, batch: Any) -> list[int]:
        """The rows of `batch` (`trace_id`, `span_id`) whose key was noted before; notes all."""

    def rotate(self) -> None:
        """Starts a new generation; the older one is let go."""

    def sizes(self) -> tuple[int, int]:
        """Keys in the current generation and in the older one."""

class NativePack:
    """A rule pack compiled for the native rule interpreter."""

    name: str
    version: str
    rule_ids: list[str]
    refused: list[tuple[str, str]]

    def evaluate(self, trajectories: Any, steps: Any) -> ArrowBatch:
        """The pack's native rules over a round's `trajectories` and `steps` record batches
        (the steps with an `attributes` column: the span attributes' JSON text)."""

class GuardRuns:
    """The runs the runtime guard was asked about, kept as native rows, and their judgement."""

    def __init__(
        self, most: int, most_spans: int, prices: list[tuple[str, float, float]]
    ) -> None: ...
    def adopt(self, trace_id: str, rows: list[dict[str, Any]], since: int) -> bool:
        """Keep the run as these span rows with its spans of the batches held after the
        `since`-th, replacing what was kept of it; False (nothing kept) when some of those
        batches are no longer remembered."""

    def hold(self, batch: Any) -> int:
        """An acknowledged batch: its spans of a kept run join it, and it is remembered a
        while; how many joined."""

    def seq(self) -> int:
        """How many acknowledged batches were held so far."""

    def begin_read(self) -> int:
        """A run is about to be read in a thread: batches are remembered until `end_read`; the
        `since` to adopt it with."""

    def end_read(self, since: int) -> None:
        """The read that began at `since` is over."""

    def count(self, trace_id: str) -> int | None:
        """Spans kept of the run (None: not kept)."""

    def room(self) -> int:
        """How many more runs are kept before the least recently asked is let go."""
    def forget(self, trace_id: str) -> None: ...
    def judge(
        self,
        call: dict[str, Any],
        agent: str | None,
        version: str | None,
        decision_of: Callable[[str, str, str], tuple[str, list[str]]],
    ) -> tuple[str, list[str], list[str], list[str], str, str | None] | str:
        """The proposed call's row weighed against the kept run under the packs in force
        (`set_packs`) and answered under the target's decision (`decision_of(service, agent,
        version)`, remembered until `decisions_changed`): (answer, reasons, evidence,
        messages, decision, parent span), or why the call is left to Python."""

    def set_packs(
        self,
        gen: int,
        natives: list[NativePack] | None,
        settings: list[tuple[list[str], str, str, bool]],
    ) -> bool:
        """The packs in force as of generation `gen`, and each one's guard settings (writes,
        on_unknown, quarantine, asks session rules; none kept when a setting is not read
        natively); False when the packs changed since."""

    def packs_gen(self) -> int:
        """The generation of the packs in force."""

    def packs_changed(self) -> None:
        """The packs in force changed: none is used until `set_packs` again."""

    def decisions_changed(self) -> None:
        """The decisions changed: the targets remembered are read again now (with the caller's
        GIL, through `listen`'s `decision_of`), the others forgotten."""

    def listen(
        self,
        tokens: list[bytes],
        sessions: bool,
        adopt: Callable[[str], bool],
        decision_of: Callable[[str, str, str], tuple[str, list[str]]],
    ) -> None:
        """The gRPC listener answers calls for the runs kept, with these tokens (none: no
        auth); `sessions`: conversations are held; `adopt(trace_id)` keeps a run not kept;
        `decision_of(service, agent, version)` gives a decision not remembered."""

    def stop_listening(self) -> None:
        """The listener answers no more calls; the callbacks to Python are let go."""

    def dropped(self) -> int:
        """Calls the listener answered whose step was dropped since the last look."""

    def answered(
        self,
    ) -> list[
        tuple[
            tuple[str, str, str | None, str, str | None],
            tuple[str, list[str], list[str], list[str], str, str | None],
            tuple[str, int, int, float, str],
        ]
    ]:
        """The calls the listeners answered since the last look: ((trace id, service, version,
        tool, tool call id), (answer, reasons, evidence, messages, decision, parent span),
        (span id, start ns, end ns, seconds, protocol: grpc or http))."""

def compile_pack(text: str, partial: bool = False) -> NativePack:
    """A pack's native form (JSON) compiled; ValueError names the first rule not evaluated
    natively, unless `partial` leaves such rules out (listed in `refused`)."""

def evaluate_packs(packs: list[NativePack], trajectories: Any, steps: Any) -> ArrowBatch:
    """Several packs' native rules over one round's batches, read once."""

def regex_set_matches(patterns: list[str], text: str) -> list[int]:
    """Which RE2 patterns the native secrets scan finds in `text` (indexes, ascending)."""

class Unsupported(Exception):
    """A round holds something the native builder does not read as the Python builder does."""

def build_round(
    spans: list[Any],
    closing: list[tuple[str, str, int, int | None]],
    prices: list[tuple[str, float, float]],
    closed_at: int,
    attributes: bool = False,
) -> tuple[ArrowBatch, ArrowBatch, list[str], ArrowBatch | None]:
    """A round's spans (RecordBatches of the columns the builder reads) to its
    `trajectories` and `steps` tables and build errors ("trace id: error"), as `build_batch`
    stores them without an evaluator. `closing`: (trace id, close reason, revision, covered
    until in µs or None); `prices`: (model prefix, USD per million input, output tokens) in
    lookup order; `closed_at` in µs. With `attributes`, the steps' span attributes (JSON
    text, one `attributes` column row for row beside `steps`), else None. Raises Unsupported
    for what it does not build."""
