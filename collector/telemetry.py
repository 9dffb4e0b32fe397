"""What every stage's self-metrics share, and the process's own.

Each stage's metrics live beside it (receivers/metrics.py, store/metrics.py...), created on an
injected registry so each test can read its own; they take their buckets from here.
"""

from __future__ import annotations

import platform

import duckdb
import prometheus_client
from prometheus_client import (
    CollectorRegistry,
    GCCollector,
    Info,
    PlatformCollector,
    ProcessCollector,
)

import collector

# A `_created` series for every counter and histogram doubles what Prometheus stores and says
# only when the process started, which `process_start_time_seconds` already says. The switch is
# process-wide and read at scrape time, so it holds for every registry built after this import.
prometheus_client.disable_created_metrics()

LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10)
ROW_BUCKETS = (1, 10, 100, 500, 1000, 2500, 5000, 10000, 25000, 50000, 100000)


def register_process_metrics(registry: CollectorRegistry) -> None:
    """What every exporter shows: its build, the process (CPU, memory, file descriptors), the
    Python runtime and garbage collector."""
    Info(
        "sextant_build", "Sextant's version and the runtime it was built on.", registry=registry
    ).info(
        {
            "version": collector.__version__,
            "python": platform.python_version(),
            "duckdb": duckdb.__version__,
        }
    )
    ProcessCollector(registry=registry)
    PlatformCollector(registry=registry)
    GCCollector(registry=registry)
