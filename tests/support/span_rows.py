"""Stored span rows made by hand: a run so far, as the guard reads it, span by span."""

from __future__ import annotations

from typing import Any

from collector.assembler.spans import SPAN_FIELDS

TRACE = "ab" * 16
ROOT = "1" * 16


def span_row(span_id: str, name: str, start: int, **kw: Any) -> dict[str, Any]:
    """A tool span of service `shop` under ROOT in TRACE (10 ns long); `kw` sets any column."""
    base: dict[str, Any] = dict.fromkeys(SPAN_FIELDS)
    base.update(
        trace_id=TRACE,
        span_id=span_id,
        parent_span_id=ROOT,
        flags=0,
        name=name,
        kind="INTERNAL",
        start_time_unix_nano=start,
        end_time_unix_nano=start + 10,
        status_code="OK",
        step_kind="tool",
        tool_name=name,
        tool_arguments="{}",
        service_name="shop",
        attributes="{}",
    )
    base.update(kw)
    return base
