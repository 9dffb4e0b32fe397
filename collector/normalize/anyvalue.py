"""OTLP AnyValue / KeyValue lists to plain Python values, the shape kept in the JSON columns."""

from __future__ import annotations

import base64
from collections.abc import Iterable
from typing import Any

SCALARS = (int, float, bool)


class AttributeReader:
    """Converts attribute lists, truncating over-long strings and remembering which keys were cut.

    One reader serves one request; `truncated` collects the keys cut in the row being read so the
    caller can flag that row (the value is kept, shortened, never dropped). `ListFields()` is used
    instead of `WhichOneof` + `getattr` because it is one call into upb per value: on the hot path
    that halves the cost of reading attributes.
    """

    __slots__ = ("max_length", "truncated")

    def __init__(self, max_length: int) -> None:
        self.max_length = max_length
        self.truncated: list[str] = []

    def attributes(self, kvs: Iterable[Any]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        limit = self.max_length
        for kv in kvs:
            fields = kv.value.ListFields()
            if not fields:
                out[kv.key] = None
                continue
            value = fields[0][1]
            if type(value) is str:
                if len(value) > limit:
                    value = value[:limit]
                    self.truncated.append(kv.key)
                out[kv.key] = value
            elif type(value) in SCALARS:
                out[kv.key] = value
            else:
                out[kv.key] = self.convert(fields[0][0].name, value, kv.key)
        return out

    def value(self, v: Any, key: str = "") -> Any:
        """One AnyValue (a log body, an array element)."""
        fields = v.ListFields()
        if not fields:
            return None
        descriptor, value = fields[0]
        if type(value) is str:
            if len(value) > self.max_length:
                self.truncated.append(key)
                return value[: self.max_length]
            return value
        if type(value) in SCALARS:
            return value
        return self.convert(descriptor.name, value, key)

    def convert(self, field: str, value: Any, key: str) -> Any:
        if field == "array_value":
            return [self.value(x, key) for x in value.values]
        if field == "kvlist_value":
            return self.attributes(value.values)
        if field == "bytes_value":
            return base64.b64encode(value).decode("ascii")
        # string_value_strindex and other Profiles-only fields carry nothing for traces.
        return None
