"""The sections of SextantConfig: one strict model per stage, each field with a default and a
description, cross-field checks that name the YAML keys."""

from __future__ import annotations

from datetime import timedelta
from importlib import resources
from pathlib import Path
from typing import Annotated, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    SecretStr,
    field_validator,
    model_validator,
)

from collector.config.access import HeaderName, HostName
from evaluators.durations import parse_duration

# Every `*_seconds` key takes a number of seconds or the one duration grammar: 30s, 5m, 1h, 7d.
Seconds = Annotated[float, BeforeValidator(parse_duration)]


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def parse_addr(value: str) -> tuple[str, int]:
    host, sep, port = value.rpartition(":")
    if not sep or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ValueError(f"expected HOST:PORT with a port 0-65535, got {value!r}")
    return host.strip("[]") or "0.0.0.0", int(port)


class TlsConfig(Strict):
    cert_file: Path = Field(description="PEM certificate chain the listener presents, leaf first.")
    key_file: Path = Field(description="PEM private key of cert_file.")
    client_ca_file: Path | None = Field(
        None, description="PEM CA certificates that client certificates are verified against."
    )
    require_client_cert: bool = Field(
        False,
        description="Refuse connections without a client certificate that client_ca_file signed"
        " (mutual TLS).",
    )

    @model_validator(mode="after")
    def _check_client_ca(self) -> TlsConfig:
        if self.require_client_cert and self.client_ca_file is None:
            raise ValueError("tls.require_client_cert needs tls.client_ca_file (the CA to trust)")
        return self


class Listener(Strict):
    addr: str = Field(description="HOST:PORT to listen on; port 0 picks a free port.")
    tls: TlsConfig | None = Field(
        None, description="Serve TLS with these certificate files; none: plain text."
    )

    @field_validator("addr")
    @classmethod
    def _check_addr(cls, value: str) -> str:
        parse_addr(value)
        return value

    @property
    def host_port(self) -> tuple[str, int]:
        return parse_addr(self.addr)


class GrpcConfig(Listener):
    addr: str = Field("0.0.0.0:4317", description="OTLP/gRPC listen address (HOST:PORT).")
    server: Literal["native", "grpcio"] = Field(
        "native",
        description="native: HTTP/2, gRPC framing and gzip run in native threads beside the"
        " event loop, which only sees each call's bytes (plain text; a listener with tls uses"
        " grpcio); grpcio: Python's gRPC asyncio server.",
    )


class HttpConfig(Listener):
    addr: str = Field("0.0.0.0:4318", description="OTLP/HTTP listen address (HOST:PORT).")
    server: Literal["native", "aiohttp"] = Field(
        "native",
        description="native: HTTP/1.1 runs in native threads beside the event loop, which only"
        " sees each request's bytes, and POST /v1/guard is answered there for a run the guard"
        " keeps (plain text; a listener with tls uses aiohttp); aiohttp: Python's HTTP server.",
    )


class AdminConfig(Listener):
    # Loopback by default, as the OpenTelemetry Collector's own servers are: the admin API
    # (SQL included) and the console are this machine's until auth.tokens is set; a deployment
    # that Prometheus scrapes from elsewhere sets 0.0.0.0:9464 (deploy/ does).
    addr: str = Field(
        "127.0.0.1:9464",
        description="Admin HTTP address: /metrics, /healthz, /readyz, the API and the console;"
        " 0.0.0.0:9464 to be scraped from other hosts (with auth.tokens).",
    )
    console: Literal["always", "loopback", "off"] = Field(
        "loopback",
        description="Serve the console (the pages outside /api/): always; loopback: with"
        " auth.tokens set, or without them only when admin.addr is a loopback address; off:"
        " never (404).",
    )
    session_hours: float = Field(
        12.0, gt=0, description="A console login lasts this long (hours), then asks again."
    )
    allowed_hosts: list[HostName] = Field(
        default_factory=list,
        description="Host names a browser may reach the console and API by, besides localhost,"
        " IP addresses, admin.addr's host and cluster.peers' hosts (others get 403: DNS"
        " rebinding); e.g. [sextant.example.com].",
    )
    login_burst: int = Field(
        10,
        ge=1,
        description="Wrong tokens a client address may send (console login or API bearer) before"
        " it is throttled.",
    )
    login_refill_seconds: Seconds = Field(
        6.0, gt=0, description="Once throttled, a client earns one more try per this long."
    )
    user_header: HeaderName | None = Field(
        None,
        description="Header an authenticating proxy in front sets to the signed-in person (e.g."
        " X-Forwarded-User): trusted as the reviewer's name on the console and API; unset:"
        " never read.",
    )


class LimitsConfig(Strict):
    max_request_bytes: int = Field(
        16 * 1024 * 1024,
        gt=0,
        description="Largest accepted request body after decompression (bytes).",
    )
    max_attribute_length: int = Field(
        64 * 1024,
        gt=0,
        description="String attribute values longer than this are truncated and flagged.",
    )


class WorkersConfig(Strict):
    processes: int = Field(
        2,
        ge=0,
        le=64,
        description="Worker processes that build and evaluate trajectories when"
        " assembler.native is off (on, none is started); 0 = inline.",
    )


class IngestConfig(Strict):
    decode_threads: int = Field(
        2,
        ge=1,
        le=64,
        description="Threads of the receiving process that decode requests (natively, without"
        " the GIL).",
    )
    inline_decode_bytes: int = Field(
        64 * 1024,
        ge=0,
        description="A lone request smaller than this is decoded in the receiver: cheaper than"
        " a hop (requests taken together are decoded in a decode thread).",
    )
    coalesce_bytes: int = Field(
        1024 * 1024,
        ge=0,
        description="Protobuf exports smaller than inline_decode_bytes that arrive together are"
        " decoded, journaled and loaded as one batch of at most this many bytes (each still"
        " answered on its own once durable); 0: each request alone.",
    )
    max_wait_seconds: Seconds = Field(
        1.0,
        description="Refuse exports (retryable) that the work in flight would keep waiting longer.",
    )
    max_assembly_lag_seconds: Seconds | None = Field(
        2.0,
        description="Refuse trace exports (retryable) while assembly and evaluation are, or at"
        " their pace will be, this far behind (sextant_assembler_lag_seconds,"
        " sextant_assembler_expected_lag_seconds, plus how long acknowledged spans have waited for"
        " their load), so every run accepted is evaluated within the quiet period and this; none:"
        " accept whatever the lag.",
    )


class RetentionConfig(Strict):
    days: int | None = Field(
        None, gt=0, description="Delete spans and trajectories older than this; none: keep all."
    )
    max_age: Seconds | None = Field(
        None,
        gt=0,
        description="Instead of `days`: delete spans and trajectories older than this duration"
        " (6h, 90m), to the moment rather than in whole days, for a store kept to hours.",
    )
    export_first: bool = Field(
        False, description="Export what is about to be deleted to export.parquet_dir first."
    )
    check_seconds: Seconds = Field(3600.0, gt=0, description="How often old data is looked for.")

    @model_validator(mode="after")
    def _one_age(self) -> RetentionConfig:
        if self.days is not None and self.max_age is not None:
            raise ValueError("give one of days and max_age, not both")
        if self.max_age is not None and self.export_first:
            raise ValueError(
                "export_first exports whole days; with max_age part of a day would be deleted"
                " unexported (use days)"
            )
        return self

    @property
    def age(self) -> timedelta | None:
        """How old deleted data is; None keeps everything."""
        if self.days is not None:
            return timedelta(days=self.days)
        return None if self.max_age is None else timedelta(seconds=self.max_age)


class SqlConfig(Strict):
    enabled: bool = Field(True, description="Serve POST /api/v1/sql on the admin port.")
    max_rows: int = Field(
        1_000_000, gt=0, description="Most rows one query returns; requests may ask for fewer."
    )
    default_rows: int = Field(
        1000, gt=0, description="Rows returned when a request does not give `max_rows`."
    )
    timeout_seconds: Seconds = Field(
        30.0, gt=0, description="A query still running after this long is interrupted."
    )
    max_result_mib: int = Field(
        64, gt=0, description="Most MiB of one answer (JSON or Arrow); the rows beyond are cut."
    )
    memory_limit: str = Field(
        "64MB",
        pattern=r"^\d+(\.\d+)?\s*(KB|MB|GB|TB|KiB|MiB|GiB|TiB)$",
        description="DuckDB operator_memory_limit of each query: sorts and hash tables spill to"
        " disk beyond it.",
    )


class ExportConfig(Strict):
    parquet_dir: Path | None = Field(
        None, description="Directory of the periodic Parquet export; none: no periodic export."
    )
    interval_seconds: Seconds = Field(
        3600.0, gt=0, description="How often the periodic export runs."
    )


class StorageConfig(Strict):
    data_dir: Path = Field(Path("sextant-data"), description="Directory of sextant.duckdb.")
    checkpoint_wal_mib: int = Field(
        64, gt=0, description="WAL size (MiB) at which a background checkpoint runs."
    )
    memory_limit: str = Field(
        "512MB",
        pattern=r"^\d+(\.\d+)?\s*(KB|MB|GB|TB|KiB|MiB|GiB|TiB)$",
        description="DuckDB memory_limit: caches beyond it are evicted, so RSS stays bounded.",
    )

    retention: RetentionConfig = Field(
        default_factory=lambda: RetentionConfig(),
        description="Deletion of old spans and trajectories (off by default).",
    )

    @property
    def database(self) -> Path:
        return self.data_dir / "sextant.duckdb"


class AssemblerConfig(Strict):
    enabled: bool = Field(
        True,
        description="Assemble (and so evaluate) trajectories. Off, spans are only stored, as when"
        " measuring ingest alone; what was stored meanwhile is assembled once it is on again.",
    )
    quiet_period_seconds: Seconds = Field(
        5.0, gt=0, description="A trace closes this long after its last span once its root ended."
    )
    max_trace_age_seconds: Seconds = Field(
        300.0, gt=0, description="A trace whose root never arrives closes (incomplete) this late."
    )
    max_open_traces: int = Field(
        100_000, gt=0, description="Open traces held; over it the oldest close as incomplete."
    )
    max_spans_per_trace: int = Field(
        10_000, gt=0, description="A trace with more spans closes early as incomplete."
    )
    tick_seconds: Seconds = Field(0.1, gt=0, description="How often due traces are closed.")
    max_round_traces: int = Field(
        2000, gt=0, description="Most traces one assembly round builds; the rest wait a tick."
    )
    # A held span costs about 1.3 KB (the decoded batch's columns) and a batch is held about a
    # quiet period and a round: 256 MiB spilled half the traces at 40,000 spans/s, read back
    # from the store at 1.8 µs of CPU a span more (docs/performance.md).
    max_held_mib: int = Field(
        512,
        ge=0,
        description="Memory for the committed span batches of open traces, from which closing"
        " traces are built; past it the oldest batches are let go and their traces are read"
        " back from the store when they close (sextant_assembler_read_back_traces_total).",
    )

    native: bool = Field(
        True,
        description="Build each round with the native builder and evaluate the rules the native"
        " interpreter supports there; Python builds and evaluates only what it leaves (other"
        " rule types, deferred results). The rows are the Python path's; a batch the native"
        " path cannot build is built in Python (sextant_assembler_native_fallbacks_total)."
        " Batches are built in the collector's threads (native_threads), not in worker"
        " processes: none is started.",
    )
    native_threads: int = Field(
        2,
        ge=1,
        le=64,
        description="Threads of the collector process that build and evaluate a round's"
        " batches side by side when `native` is on (the native builder and interpreter run"
        " without the GIL; a batch they refuse is built in Python in the same thread).",
    )

    @model_validator(mode="after")
    def _check_times(self) -> AssemblerConfig:
        if self.max_trace_age_seconds < self.quiet_period_seconds:
            raise ValueError(
                "assembler.max_trace_age_seconds must not be shorter than"
                " assembler.quiet_period_seconds"
            )
        return self


# The shipped packs, as package data: `collector/data/rules` links to the top-level `rules/` in
# the source tree and is a copy of it in a wheel, so both find them here.
BUILTIN_RULES = Path(str(resources.files("collector.data") / "rules")).resolve()


class RulesConfig(Strict):
    paths: list[Path] = Field(
        default_factory=lambda: [BUILTIN_RULES],
        description="Rule pack files or directories of *.yaml packs (default: the shipped rules/).",
    )
    reload_seconds: Seconds = Field(2.0, gt=0, description="How often packs are checked for edits.")
    disabled: list[str] = Field(
        default_factory=list, description="`pack` or `pack/rule` ids that are not evaluated."
    )


class ClusterConfig(Strict):
    replica: str | None = Field(
        None,
        description="This process's name among the replicas behind a gateway (the pod name):"
        " how its rows are named, and how it finds itself in `peers`.",
    )
    peers: list[str] = Field(
        default_factory=list,
        description="The replicas' admin URLs (this one is left out by its name): the window"
        " rules' resharding check, and the console's SQL page over every replica.",
    )
    peer_token: SecretStr | None = Field(
        None, description="Bearer token for the peers' admin APIs (default: auth.tokens' first)."
    )


class ModelPrice(Strict):
    input: float = Field(ge=0, description="USD per million input tokens.")
    output: float = Field(ge=0, description="USD per million output tokens.")


class PricingConfig(Strict):
    models: dict[str, ModelPrice] = Field(
        default_factory=dict,
        description="Prices that override or extend the shipped table, by model name prefix.",
    )
