"""Which traces may already have a stored trajectory, known without asking the store.

Every round asks the store for the previous revision of each trace it closes. Nearly every
closing trace is new and has none, yet DuckDB answers `trace_id IN (...)` by scanning the
whole `trajectories` table (its index serves no list), so a round's question grew with every
run ever stored: 22-80 ms a round of 2,000 traces at a million stored runs, ten times that at
ten million (docs/performance.md, "Previous revisions without scanning every run"). A Bloom
filter over the stored runs' trace ids answers "certainly not stored" for the new ones; only the
rest are asked, and the store's answer is the one used. It never forgets a trace that is stored
(ids are added before their rows are committed, and a stored run is never taken out), so a
rebuild is never mistaken for a first build; a run deleted by retention stays in it as one more
trace asked about for nothing.

It grows in layers, each twice the capacity of the one before and with half its false-positive
rate, so a new trace is thought stored (and asked about) less than once in 50,000 whatever the
number of runs, and a round of 2,000 new traces skips the question 96 % of the time. That
costs 3-4 bytes a run: the runs stored when the process started, and those closed since.
"""

from __future__ import annotations

import threading
from typing import Any

import numpy as np

FIRST_CAPACITY = 1 << 20  # trace ids the first layer holds at its rate
FIRST_RATE = 1e-5  # its false-positive rate; each later layer halves it
LOAD_ROWS = 100_000  # trace ids hashed at a time when loading the stored runs
LN2 = float(np.log(2))


MASK32 = np.uint64(0xFFFFFFFF)


class Layer:
    """One Bloom filter of `capacity` ids at false-positive rate `rate`, bits in bytes.

    An id's bits come from the two 32-bit halves of its 64-bit hash (Kirsch-Mitzenmacher),
    each mapped onto the layer by a multiplication (Lemire), not a division."""

    def __init__(self, capacity: int, rate: float) -> None:
        self.capacity = capacity
        self.rate = rate
        bits = int(-capacity * np.log(rate) / LN2**2)
        self.size = min(1 << 32, max(64, bits + (-bits % 8)))
        self.hashes = max(1, round(self.size / capacity * LN2))
        self.bits = np.zeros(self.size // 8, dtype=np.uint8)
        self.count = 0

    def _bits(self, low: np.ndarray, high: np.ndarray, steps: np.ndarray | np.uint64) -> np.ndarray:
        """The bit positions of ids whose hash halves are `low` and `high`, at `steps`."""
        mixed = (low + steps * high) & MASK32
        return (mixed * np.uint64(self.size)) >> np.uint64(32)

    def add(self, low: np.ndarray, high: np.ndarray) -> None:
        steps = np.arange(self.hashes, dtype=np.uint64)[None, :]
        positions = self._bits(low[:, None], high[:, None], steps).ravel()
        masks = np.left_shift(np.uint8(1), (positions & np.uint64(7)).astype(np.uint8))
        np.bitwise_or.at(self.bits, (positions >> np.uint64(3)).astype(np.intp), masks)
        self.count += len(low)

    def holds(self, low: np.ndarray, high: np.ndarray) -> np.ndarray:
        """Which ids have all their bits set: probed one bit at a time, each probe over the ids
        whose bits so far were all set (half of them go at each for a new id)."""
        alive = np.arange(len(low))
        for step in range(self.hashes):
            positions = self._bits(low[alive], high[alive], np.uint64(step))
            byte = self.bits[(positions >> np.uint64(3)).astype(np.intp)]
            alive = alive[((byte >> (positions & np.uint64(7)).astype(np.uint8)) & 1) == 1]
            if not alive.size:
                break
        found = np.zeros(len(low), dtype=bool)
        found[alive] = True
        return found


def halves(trace_ids: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """The two 32-bit halves of each id's hash (Python's: the same for an id within this
    process), the second odd."""
    hashes = np.fromiter((hash(t) for t in trace_ids), dtype=np.int64, count=len(trace_ids))
    hashes = hashes.view(np.uint64)
    return hashes & MASK32, (hashes >> np.uint64(32)) | np.uint64(1)


class StoredRuns:
    """The trace ids of stored trajectories, as a growing Bloom filter; thread-safe."""

    def __init__(self, capacity: int = FIRST_CAPACITY, rate: float = FIRST_RATE) -> None:
        self._layers = [Layer(capacity, rate)]
        self._lock = threading.Lock()

    @property
    def bytes(self) -> int:
        return sum(layer.bits.nbytes for layer in self._layers)

    @property
    def count(self) -> int:
        """Ids added (a trace stored in several revisions counts each time it was added)."""
        return sum(layer.count for layer in self._layers)

    def load(self, cursor: Any) -> int:
        """Adds the trace id of every stored trajectory; how many rows were read."""
        rows = 0
        reader = cursor.sql("SELECT trace_id FROM trajectories").to_arrow_reader(LOAD_ROWS)
        for batch in reader:
            self.add(batch.column(0).to_pylist())
            rows += batch.num_rows
        return rows

    def add(self, trace_ids: list[str]) -> None:
        """Before their rows are committed: these traces have a stored trajectory."""
        if not trace_ids:
            return
        low, high = halves(trace_ids)
        with self._lock:
            while low.size:
                layer = self._layers[-1]
                if layer.count >= layer.capacity:
                    layer = Layer(layer.capacity * 2, layer.rate / 2)
                    self._layers.append(layer)
                room = layer.capacity - layer.count
                layer.add(low[:room], high[:room])
                low, high = low[room:], high[room:]

    def maybe_stored(self, trace_ids: list[str]) -> list[str]:
        """The ids among `trace_ids` that may have a stored trajectory (the others have none)."""
        if not trace_ids:
            return []
        low, high = halves(trace_ids)
        found = np.zeros(len(trace_ids), dtype=bool)
        with self._lock:
            for layer in self._layers:
                unknown = np.flatnonzero(~found)
                found[unknown[layer.holds(low[unknown], high[unknown])]] = True
        return [t for t, maybe in zip(trace_ids, found.tolist(), strict=True) if maybe]
