"""The figures of one end-to-end benchmark run, as text for a reader and as JSON for
docs/performance.md, and what they are read from in the collector's /metrics."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from collector.bench.memory import RssFigures
from collector.bench.stages import StageRow

ASSEMBLY_LATENCY = "sextant_assembler_assembly_latency_seconds"


def sample_value(metrics: str, name: str, **labels: str) -> float:
    """The sum of the samples called `name` with `labels` (and any others); 0 if none."""
    return sum(
        s.value
        for family in text_string_to_metric_families(metrics)
        for s in family.samples
        if s.name == name and all(s.labels.get(k) == v for k, v in labels.items())
    )


def has_sample(metrics: str, name: str) -> bool:
    return any(
        s.name == name for family in text_string_to_metric_families(metrics) for s in family.samples
    )


def quantile(metrics: str, family_name: str, q: float) -> float:
    """A histogram's quantile as the upper bound of its bucket (what the reader can claim:
    "at most"); nan without observations."""
    buckets: list[tuple[float, float]] = []
    for family in text_string_to_metric_families(metrics):
        if family.name == family_name:
            buckets = [
                (float(s.labels["le"]), s.value)
                for s in family.samples
                if s.name.endswith("_bucket")
            ]
    total = buckets[-1][1] if buckets else 0
    for bound, count in buckets:
        if total and count >= q * total:
            return bound
    return math.nan


@dataclass
class Keeping:
    """Whether assembly and evaluation kept up with the load (runs with them on)."""

    caught_up_s: float  # after the load stopped, every stored trace has its trajectory
    target_s: float  # the quiet period + 1 s
    lag_at_stop_s: float  # sextant_assembler_lag_seconds when the load stopped
    open_at_stop: int  # traces open when the load stopped
    latency_p50_s: float  # assembly latency histogram, bucket upper bounds
    latency_p99_s: float
    evaluate_us_per_span: float  # evaluation's wall time, inside `workers` and `assemble`
    most_up_s: float = math.inf  # after the load stopped, 99 % of the traces had theirs
    most_target_s: float = math.inf  # the quiet period + 3 s

    @property
    def kept_up(self) -> bool:
        return self.caught_up_s <= self.target_s


@dataclass
class RunFigures:
    scenario: str
    mode: str  # "ingest" (assembly and evaluation off) or "full" (the shipped packs)
    protocol: str
    spans_per_request: int
    bytes_per_span: float
    concurrency: int
    rate: float  # offered spans/s; 0: as fast as answered
    load_s: float
    stored_spans: int
    spans_per_s: float
    export_p50_ms: float
    export_p99_ms: float
    failed_requests: int
    cores: int
    stages: list[StageRow]
    load_generator: StageRow
    rss: RssFigures
    machine: list[StageRow] = field(default_factory=list)  # the rest of the machine, stolen
    trajectories: int = 0
    results: int = 0
    uncovered_traces: int = 0
    keeping: Keeping | None = None
    retried_requests: int = 0  # refusals the load generator retried after their wait
    notes: list[str] = field(default_factory=list)

    @property
    def total(self) -> StageRow:
        return StageRow(
            "total",
            sum(r.us_per_span for r in self.stages),
            sum(r.share for r in self.stages),
            sum(r.load_us_per_span for r in self.stages),
        )

    def as_json(self) -> dict[str, Any]:
        doc = asdict(self)
        doc["stages"] = {
            r.stage: {
                "us_per_span": r.us_per_span,
                "load_us_per_span": r.load_us_per_span,
                "share_pct": r.share,
            }
            for r in [*self.stages, self.total]
        }
        doc["load_generator"] = {
            "us_per_span": self.load_generator.us_per_span,
            "share_pct": self.load_generator.share,
        }
        doc["machine"] = {r.stage: {"share_pct": r.share} for r in self.machine}
        if self.keeping is not None:
            doc["keeping"]["kept_up"] = self.keeping.kept_up
        return rounded(doc)


def rounded(value: Any) -> Any:
    """Figures to 3 decimals, and inf/nan as null, so that the JSON is plain and short."""
    if isinstance(value, float):
        return round(value, 3) if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: rounded(v) for k, v in value.items()}
    if isinstance(value, list):
        return [rounded(v) for v in value]
    return value


def render(f: RunFigures) -> str:
    """A run as a few lines and the stage table: per stage, CPU µs per stored span until the
    work the spans caused was done (assembled and evaluated, with assembly on), the part of it
    spent while the load ran, and the share of the cores while the load ran."""
    rate = f"{f.rate:,.0f} spans/s offered" if f.rate else "as fast as answered"
    lines = [
        f"{f.scenario} [{f.mode}] {f.protocol}, {f.spans_per_request} spans/request"
        f" ({f.bytes_per_span:.0f} B/span), {f.concurrency} exporters, {rate}, {f.load_s:.1f} s",
        f"  stored {f.stored_spans:,} spans = {f.spans_per_s:,.0f} spans/s | export p50"
        f" {f.export_p50_ms:.1f} ms p99 {f.export_p99_ms:.1f} ms | {f.failed_requests} failed,"
        f" {f.retried_requests} refusals retried",
        f"  {'stage':<16s}{'CPU µs/span':>12s}{'in the load':>12s}{f'% of {f.cores} cores':>15s}",
    ]
    for row in [*f.stages, f.total, f.load_generator, *f.machine]:
        if row.us_per_span >= 0.05 or row.share >= 0.05 or row.stage == "total":
            per_span, during = (
                "-" if math.isnan(v) else f"{v:.1f}"
                for v in (row.us_per_span, row.load_us_per_span)
            )
            lines.append(f"  {row.stage:<16s}{per_span:>12s}{during:>12s}{row.share:>15.1f}")
    if (k := f.keeping) is not None:
        verdict = "kept up" if k.kept_up else "fell behind"
        caught = (
            f"all assembled and evaluated {k.caught_up_s:.1f} s after the load stopped"
            if math.isfinite(k.caught_up_s)
            else "not all assembled when the wait ended"
        )
        lines += [
            f"  keeping up: {verdict}: {caught} (target <= {k.target_s:.1f} s); at the stop:"
            f" lag {k.lag_at_stop_s:.1f} s, {k.open_at_stop:,} traces open",
            f"  99 % of the traces assembled and evaluated {k.most_up_s:.1f} s after the load"
            f" stopped (target <= {k.most_target_s:.1f} s)",
            f"  assembly latency p50 <= {k.latency_p50_s:g} s, p99 <= {k.latency_p99_s:g} s;"
            f" evaluation {k.evaluate_us_per_span:.1f} µs/span (wall, inside workers/assemble)",
            f"  stored {f.trajectories:,} trajectories, {f.results:,} results;"
            f" {f.uncovered_traces:,} traces without their current trajectory",
        ]
    r = f.rss
    lines.append(
        f"  RSS start {r.start_mib:.0f} MiB, end {r.end_mib:.0f}, peak {r.peak_mib:.0f},"
        f" slope {r.slope_mib_per_min:+.1f} MiB/min ({r.samples} samples)"
    )
    lines += [f"  note: {note}" for note in f.notes]
    return "\n".join(lines)
