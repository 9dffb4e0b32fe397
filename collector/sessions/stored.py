"""Which sessions may have a stored row, so that a turn of a new conversation costs no query.

A Bloom filter over the (session id, service) keys: the keys stored when the stage started,
and every key it stores since (it is the only writer of `sessions`). It never says a stored
session is absent; it may say an absent one is there (then its row is looked for and not
found), more often as sessions accumulate: at 1 M sessions about 1 in 500 new ones, at 5 M
about 1 in 4. Keys are hashed with Python's `hash`, stable within the process, which is as
long as the filter lives.
"""

from __future__ import annotations

from collections.abc import Iterable

BITS = 1 << 24  # 2 MiB
HASHES = 4
MASK = (1 << 64) - 1


class MaybeStored:
    def __init__(self, bits: int = BITS) -> None:
        self.bits = bits
        self._set = bytearray(bits // 8)

    def _places(self, key: tuple[str, str]) -> list[int]:
        h = hash(key) & MASK
        low, high = h & 0xFFFFFFFF, (h >> 32) | 1
        return [(low + i * high) % self.bits for i in range(HASHES)]

    def add(self, keys: Iterable[tuple[str, str]]) -> None:
        for key in keys:
            for place in self._places(key):
                self._set[place >> 3] |= 1 << (place & 7)

    def __contains__(self, key: tuple[str, str]) -> bool:
        return all(self._set[p >> 3] & (1 << (p & 7)) for p in self._places(key))
