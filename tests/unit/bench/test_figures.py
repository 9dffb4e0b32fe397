"""The benchmark's figures: what is read from /metrics, and the report as text and JSON."""

from __future__ import annotations

import math

import orjson

from collector.bench.figures import Keeping, RunFigures, quantile, render, sample_value
from collector.bench.memory import RssFigures
from collector.bench.stages import StageRow

METRICS = """\
# TYPE sextant_assembler_assembly_latency_seconds histogram
sextant_assembler_assembly_latency_seconds_bucket{le="5.0"} 10.0
sextant_assembler_assembly_latency_seconds_bucket{le="5.5"} 95.0
sextant_assembler_assembly_latency_seconds_bucket{le="10.0"} 100.0
sextant_assembler_assembly_latency_seconds_bucket{le="+Inf"} 100.0
sextant_assembler_assembly_latency_seconds_count 100.0
sextant_assembler_assembly_latency_seconds_sum 530.0
# TYPE sextant_assembler_open_traces gauge
sextant_assembler_open_traces 12.0
"""


def test_quantiles_are_bucket_bounds_and_samples_are_summed() -> None:
    name = "sextant_assembler_assembly_latency_seconds"
    assert quantile(METRICS, name, 0.5) == 5.5
    assert quantile(METRICS, name, 0.99) == 10.0
    assert math.isnan(quantile("", name, 0.5))
    assert sample_value(METRICS, "sextant_assembler_open_traces") == 12.0


def figures(caught_up: float) -> RunFigures:
    return RunFigures(
        scenario="grpc-512",
        mode="full",
        protocol="grpc",
        spans_per_request=510,
        bytes_per_span=899.0,
        concurrency=4,
        rate=0.0,
        load_s=10.0,
        stored_spans=100_000,
        spans_per_s=10_000.0,
        export_p50_ms=50.0,
        export_p99_ms=200.0,
        failed_requests=0,
        cores=2,
        stages=[StageRow("receive", 20.0, 10.0, 18.0), StageRow("write", 14.0, 7.0, 11.0)],
        load_generator=StageRow("load generator", 5.0, 2.5),
        rss=RssFigures(300.0, 320.0, 400.0, 0.5, 11),
        machine=[StageRow("stolen", math.nan, 1.0)],
        keeping=Keeping(caught_up, 6.0, 0.1, 500, 5.1, 5.5, 30.0),
    )


def test_the_text_has_the_stage_table_with_its_total() -> None:
    text = render(figures(5.4))
    assert "receive                 20.0        18.0           10.0" in text
    assert "total                   34.0        29.0           17.0" in text
    assert "stolen                     -           -            1.0" in text
    assert "kept up: all assembled and evaluated 5.4 s after the load stopped" in text


def test_the_json_is_plain_even_when_assembly_never_caught_up() -> None:
    doc = orjson.loads(orjson.dumps(figures(math.inf).as_json()))
    assert doc["stages"]["total"] == {
        "us_per_span": 34.0,
        "load_us_per_span": 29.0,
        "share_pct": 17.0,
    }
    assert doc["keeping"]["caught_up_s"] is None
    assert doc["keeping"]["kept_up"] is False
    assert doc["machine"] == {"stolen": {"share_pct": 1.0}}
    assert "not all assembled" in render(figures(math.inf))
