"""Which keys may have a stored row, known without asking the store: a Bloom filter.

DuckDB answers `key IN (...)` by scanning the whole table (an index serves no list), so a
stage that asked the store about every key it handles paid for every row ever stored: the
assembler's question "which closing traces already have a trajectory?" cost 12-21 ms a round of
2,000 traces with up to a million stored runs and 21-29 ms with five million (docs/performance.md,
"Previous revisions without scanning every run"); the sessions stage asks the same of
sessions. Nearly every key is new; the filter answers "certainly not stored" for those, and only
the rest are asked, the store's answer being the one used. It never forgets a key (a stage adds
its keys before their rows are committed, and none is taken out), so a stored row is never taken
for a missing one; a row deleted by retention stays in it as one more key asked about for
nothing.

It grows in layers, each twice the capacity of the one before and with half its false-positive
rate, so a new key is thought stored (and asked about) less than once in 50,000 whatever the
number of keys, and a round of 2,000 new keys skips the question 96 % of the time. That costs
3-8 bytes a key (a new layer is allocated whole): those stored when the process started, and
those added since. Keys are hashed with Python's `hash`, stable within the process, which is as
long as the filter lives.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Hashable, Sequence
from typing import Any, Generic, TypeVar

import numpy as np

from collector.store.database import Database
from collector.threads import name_os_thread

log = logging.getLogger(__name__)

K = TypeVar("K", bound=Hashable)
FIRST_CAPACITY = 1 << 20  # keys the first layer holds at its rate
FIRST_RATE = 1e-5  # its false-positive rate; each later layer halves it
LOAD_ROWS = 100_000  # keys hashed at a time when loading the stored rows
LN2 = float(np.log(2))
MASK32 = np.uint64(0xFFFFFFFF)


class Layer:
    """One Bloom filter of `capacity` keys at false-positive rate `rate`, bits in bytes.

    A key's bits come from the two 32-bit halves of its 64-bit hash (Kirsch-Mitzenmacher),
    each mapped onto the layer by a multiplication (Lemire), not a division."""

    def __init__(self, capacity: int, rate: float) -> None:
        self.capacity = capacity
        self.rate = rate
        bits = int(-capacity * np.log(rate) / LN2**2)
        self.size = min(1 << 32, max(64, bits + (-bits % 8)))
        self.hashes = max(1, round(self.size / capacity * LN2))
        self.bits = np.zeros(self.size // 8, dtype=np.uint8)
        self.count = 0

    def _positions(
        self, low: np.ndarray, high: np.ndarray, steps: np.ndarray | np.uint64
    ) -> np.ndarray:
        """The bit positions of keys whose hash halves are `low` and `high`, at `steps`."""
        mixed = (low + steps * high) & MASK32
        return (mixed * np.uint64(self.size)) >> np.uint64(32)

    def add(self, low: np.ndarray, high: np.ndarray) -> None:
        steps = np.arange(self.hashes, dtype=np.uint64)[None, :]
        positions = self._positions(low[:, None], high[:, None], steps).ravel()
        masks = np.left_shift(np.uint8(1), (positions & np.uint64(7)).astype(np.uint8))
        np.bitwise_or.at(self.bits, (positions >> np.uint64(3)).astype(np.intp), masks)
        self.count += len(low)

    def holds(self, low: np.ndarray, high: np.ndarray) -> np.ndarray:
        """Which keys have all their bits set: probed one bit at a time, each probe over the
        keys whose bits so far were all set (half of them go at each for a new key)."""
        alive = np.arange(len(low))
        for step in range(self.hashes):
            positions = self._positions(low[alive], high[alive], np.uint64(step))
            byte = self.bits[(positions >> np.uint64(3)).astype(np.intp)]
            alive = alive[((byte >> (positions & np.uint64(7)).astype(np.uint8)) & 1) == 1]
            if not alive.size:
                break
        found = np.zeros(len(low), dtype=bool)
        found[alive] = True
        return found


def halves(keys: Sequence[Hashable]) -> tuple[np.ndarray, np.ndarray]:
    """The two 32-bit halves of each key's hash, the second odd."""
    hashes = np.fromiter((hash(k) for k in keys), dtype=np.int64, count=len(keys))
    hashes = hashes.view(np.uint64)
    return hashes & MASK32, (hashes >> np.uint64(32)) | np.uint64(1)


class MaybeStored(Generic[K]):
    """The keys of a table's stored rows, as a growing Bloom filter; thread-safe."""

    def __init__(
        self, capacity: int = FIRST_CAPACITY, rate: float = FIRST_RATE, complete: bool = False
    ) -> None:
        self._layers = [Layer(capacity, rate)]
        self._lock = threading.Lock()
        # Whether it holds every stored key: once loaded (or for a table known empty). Until
        # then every key may be stored.
        self._complete = complete
        self.loading: threading.Thread | None = None  # the load behind, while it runs

    @property
    def bytes(self) -> int:
        return sum(layer.bits.nbytes for layer in self._layers)

    @property
    def count(self) -> int:
        """Keys added (one added twice counts twice)."""
        return sum(layer.count for layer in self._layers)

    def load(self, cursor: Any, query: str) -> int:
        """Adds the key of every row `query` gives (one column: the value; more: a tuple of
        them); how many rows were read."""
        rows = 0
        for batch in cursor.sql(query).to_arrow_reader(LOAD_ROWS):
            columns = [column.to_pylist() for column in batch.columns]
            keys: list[Any] = columns[0] if len(columns) == 1 else list(zip(*columns, strict=True))
            self.add(keys)
            rows += batch.num_rows
        self._complete = True
        return rows

    def load_behind(self, database: Database, query: str) -> None:
        """Loads the stored keys in a thread of its own (`loading`; about 0.7 s a million keys),
        so a stage starts at once: until they are in, every key may be stored. Keys added meanwhile
        are kept, so a row committed after the load's snapshot is held either way."""
        self._complete = False

        def run() -> None:  # the load marks it complete
            name_os_thread()
            try:
                cursor = database.cursor()
                try:
                    rows = self.load(cursor, query)
                finally:
                    cursor.close()
            except Exception as exc:  # every key stays "maybe": the store is asked, as without
                log.warning("stored keys not loaded (%s): the store is asked about each", exc)
                return
            log.debug("loaded %d stored keys (%s)", rows, query)

        self.loading = threading.Thread(target=run, name="sextant-stored-keys", daemon=True)
        self.loading.start()

    def add(self, keys: Sequence[K]) -> None:
        """Before their rows are committed: these keys have a stored row."""
        if not keys:
            return
        low, high = halves(keys)
        with self._lock:
            while low.size:
                layer = self._layers[-1]
                if layer.count >= layer.capacity:
                    layer = Layer(layer.capacity * 2, layer.rate / 2)
                    self._layers.append(layer)
                room = layer.capacity - layer.count
                layer.add(low[:room], high[:room])
                low, high = low[room:], high[room:]

    def maybe_stored(self, keys: Sequence[K]) -> list[K]:
        """The keys among `keys` that may have a stored row (the others have none)."""
        if not keys or not self._complete:
            return list(keys)
        low, high = halves(keys)
        found = np.zeros(len(keys), dtype=bool)
        with self._lock:
            for layer in self._layers:
                unknown = np.flatnonzero(~found)
                found[unknown[layer.holds(low[unknown], high[unknown])]] = True
        return [k for k, maybe in zip(keys, found.tolist(), strict=True) if maybe]
