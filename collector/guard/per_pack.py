"""What the guard reads off a compiled pack (the rules it asks, which of them are session
rules), made once per pack version: packs are compiled once per version and kept, and reading
a pydantic rule's fields on every call was a tenth of a call's time."""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic, TypeVar

from evaluators.rulepack import RulePack

T = TypeVar("T")
PACK_VERSIONS = 256  # pack versions whose reading is kept (the pack kept with it)


class PerPack(Generic[T]):
    """`read(pack)`, kept with the pack it was read from: a later pack that Python gives the
    same id is read anew."""

    def __init__(self, read: Callable[[RulePack], T]) -> None:
        self.read = read
        self._kept: dict[int, tuple[RulePack, T]] = {}

    def __call__(self, pack: RulePack) -> T:
        found = self._kept.get(id(pack))
        if found is None or found[0] is not pack:
            if len(self._kept) >= PACK_VERSIONS:
                self._kept.clear()
            found = self._kept[id(pack)] = (pack, self.read(pack))
        return found[1]
