"""The collector's memory during a benchmark: RSS of it and its workers, sampled every second,
with the trend that tells a leak from the ups and downs of caches and checkpoints."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from pathlib import Path

from collector.bench.stages import PROC, children

MIB = 1024.0


def process_rss_kib(pid: int) -> int:
    """RSS of one process, in KiB; 0 once it is gone."""
    try:
        status = (PROC / str(pid) / "status").read_text()
    except OSError:
        return 0
    for line in status.splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def rss_kib(pid: int) -> int:
    """RSS of a process and of its children (the worker processes), in KiB."""
    return sum(process_rss_kib(each) for each in [pid, *children(pid)])


def slope_per_minute(points: list[tuple[float, float]]) -> float:
    """Least-squares slope of (seconds, value) points, per minute; 0 for fewer than two."""
    if len(points) < 2:
        return 0.0
    n = len(points)
    mean_t = sum(t for t, _ in points) / n
    mean_v = sum(v for _, v in points) / n
    spread = sum((t - mean_t) ** 2 for t, _ in points)
    if not spread:
        return 0.0
    covariance = sum((t - mean_t) * (v - mean_v) for t, v in points)
    return 60.0 * covariance / spread


@dataclass(frozen=True)
class RssFigures:
    start_mib: float
    end_mib: float
    peak_mib: float
    slope_mib_per_min: float
    samples: int


class RssSampler:
    """Samples `rss_kib(pid)` every `interval` seconds in a thread, from start to stop."""

    def __init__(self, pid: int, interval: float = 1.0) -> None:
        self.pid = pid
        self.interval = interval
        self.points: list[tuple[float, float]] = []
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, name="rss-sampler", daemon=True)

    def start(self) -> RssSampler:
        self._started = time.monotonic()
        self._sample()
        self._thread.start()
        return self

    def _sample(self) -> None:
        if Path(PROC / str(self.pid)).exists():
            self.points.append((time.monotonic() - self._started, rss_kib(self.pid) / MIB))

    def _run(self) -> None:
        while not self._done.wait(self.interval):
            self._sample()

    def stop(self) -> RssFigures:
        self._done.set()
        self._thread.join()
        self._sample()
        values = [v for _, v in self.points] or [0.0]
        return RssFigures(
            start_mib=values[0],
            end_mib=values[-1],
            peak_mib=max(values),
            slope_mib_per_min=slope_per_minute(self.points),
            samples=len(self.points),
        )
