"""OTLP AnyValue / KeyValue lists to plain Python values, the shape kept in the JSON columns."""

from __future__ import annotations

import base64
import math
from collections.abc import Iterable
from typing import Any

SCALARS = frozenset(("int_value", "bool_value"))


def finite(number: float) -> float | None:
    """JSON has no NaN or Infinity: they are stored, and normalized, as null."""
    return number if math.isfinite(number) else None


class AttributeReader:
    """Converts attribute lists, truncating over-long strings and remembering which keys were cut.

    One reader serves one request; `truncated` collects the keys cut in the row being read so the
    caller can flag that row (the value is kept, shortened, never dropped). On a freshly parsed
    message `WhichOneof` + one getter is the cheapest way through upb (cheaper than `ListFields`).
    """

    __slots__ = ("max_length", "truncated")

    def __init__(self, max_length: int) -> None:
        self.max_length = max_length
        self.truncated: list[str] = []

    def attributes(self, kvs: Iterable[Any]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        limit = self.max_length
        for kv in kvs:
            v = kv.value
            which = v.WhichOneof("value")
            if which == "string_value":
                value = v.string_value
                if len(value) > limit:
                    value = value[:limit]
                    self.truncated.append(kv.key)
                out[kv.key] = value
            elif which in SCALARS:
                out[kv.key] = getattr(v, which)
            elif which == "double_value":
                out[kv.key] = finite(v.double_value)
            else:
                out[kv.key] = self.value(v, kv.key)
        return out

    def value(self, v: Any, key: str = "") -> Any:
        """One AnyValue (a log body, an array element)."""
        which = v.WhichOneof("value")
        if which is None:
            return None
        value = getattr(v, which)
        if which == "string_value":
            if len(value) > self.max_length:
                self.truncated.append(key)
                return value[: self.max_length]
            return value
        if which in SCALARS:
            return value
        if which == "double_value":
            return finite(value)
        return self.convert(which, value, key)

    def convert(self, field: str, value: Any, key: str) -> Any:
        if field == "array_value":
            return [self.value(x, key) for x in value.values]
        if field == "kvlist_value":
            return self.attributes(value.values)
        if field == "bytes_value":
            return base64.b64encode(value).decode("ascii")
        # string_value_strindex and other Profiles-only fields carry nothing for traces.
        return None
