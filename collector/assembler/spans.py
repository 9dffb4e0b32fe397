"""The stored spans of one trace as a tree: a lazy view of each row, and their causal order."""

from __future__ import annotations

from typing import Any

import orjson

# The columns of `spans` the builder reads; the query that feeds it selects exactly these.
SPAN_FIELDS = (
    "trace_id",
    "span_id",
    "parent_span_id",
    "flags",
    "name",
    "kind",
    "scope_name",
    "start_time_unix_nano",
    "end_time_unix_nano",
    "status_code",
    "step_kind",
    "tool_name",
    "tool_call_id",
    "tool_arguments",
    "tool_result",
    "model",
    "input_tokens",
    "output_tokens",
    "agent_name",
    "conversation_id",
    "user_id",
    "error_type",
    "service_name",
    "service_version",
    "attributes",
    "events",
)
EXPLICIT_AGENT_KEYS = ("gen_ai.agent.name", "agent.name")


class SpanView:
    """One stored span with its attribute JSON decoded only when something needs it."""

    __slots__ = ("_attrs", "children", "row")

    def __init__(self, row: dict[str, Any]) -> None:
        self.row = row
        self.children: list[SpanView] = []
        self._attrs: dict[str, Any] | None = None

    @property
    def attrs(self) -> dict[str, Any]:
        if self._attrs is None:
            self._attrs = orjson.loads(self.row["attributes"] or "{}")
        return self._attrs

    def mentions(self, text: str) -> bool:
        return text in (self.row["attributes"] or "") or text in (self.row["events"] or "")

    def sextant_value(self, key: str) -> Any:
        """A `sextant.*` attribute of the span, or of one of its events."""
        if not self.mentions(key):
            return None
        if key in self.attrs:
            return self.attrs[key]
        for event in orjson.loads(self.row["events"] or "[]"):
            if key in event.get("attributes", {}):
                return event["attributes"][key]
        return None

    def is_graph_node(self) -> bool:
        """LangGraph + OpenInference marks every node visit AGENT; those are not agents."""
        return self.mentions("langgraph_node") and "langgraph_node" in str(
            self.attrs.get("metadata", "")
        )

    def explicit_agent(self) -> bool:
        name = self.row["name"] or ""
        return (
            any(self.attrs.get(k) for k in EXPLICIT_AGENT_KEYS)
            or name.startswith(("invoke_agent ", "create_agent "))
            or name.endswith(".agent")
        )


REMOTE_PARENT = 0x300  # OTLP span flags: has-is-remote | is-remote


def remote_parent(row: dict[str, Any]) -> bool:
    """The parent lives in another service's trace data: the span is a local root."""
    return bool(row["parent_span_id"]) and (row.get("flags") or 0) & REMOTE_PARENT == REMOTE_PARENT


def causal_order(spans: list[SpanView]) -> tuple[list[tuple[SpanView, int]], bool]:
    """Depth-first over the span tree, siblings by start time; and whether a parent is missing.

    Spans whose parent is absent hang at the top; a parent cycle (bad data) is broken where the
    walk first meets it, so every span appears exactly once.
    """
    by_id = {s.row["span_id"]: s for s in spans}
    roots: list[SpanView] = []
    missing_parent = False
    for span in spans:
        parent = span.row["parent_span_id"]
        if parent and parent in by_id and parent != span.row["span_id"]:
            by_id[parent].children.append(span)
        else:
            missing_parent |= bool(parent) and not remote_parent(span.row)
            roots.append(span)

    def key(s: SpanView) -> tuple[int, int, str]:
        return (s.row["start_time_unix_nano"], s.row["end_time_unix_nano"], s.row["span_id"])

    ordered: list[tuple[SpanView, int]] = []
    seen: set[str] = set()
    root_ids = {s.row["span_id"] for s in roots}
    for start in [*sorted(roots, key=key), *sorted(spans, key=key)]:
        if start.row["span_id"] in seen:
            continue
        if start.row["span_id"] not in root_ids:
            missing_parent = True  # reached only through a cycle
        stack = [(start, 0)]
        while stack:
            span, depth = stack.pop()
            if span.row["span_id"] in seen:
                continue
            seen.add(span.row["span_id"])
            ordered.append((span, depth))
            stack.extend((c, depth + 1) for c in sorted(span.children, key=key, reverse=True))
    return ordered, missing_parent
