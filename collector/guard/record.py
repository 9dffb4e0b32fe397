"""The guard's checks as steps of the runs they judged: each answer becomes a span of the same
trace, stored through the pipeline's own ingest like any exported span, so the verdict
afterwards sees that the agent asked and what it was told.

Answers are gathered for `record_linger_seconds` and stored as one OTLP/JSON request, so a
thousand calls a second cost a few ingest requests, not a thousand; the answer never waits for
its step to be stored.
"""

from __future__ import annotations

import asyncio
import logging
from collections import defaultdict
from collections.abc import Awaitable, Callable
from typing import Any

import orjson

from collector.assembler.refusals import GUARD_POLICY
from collector.guard.call import GuardAnswer, GuardRequest
from collector.guard.metrics import GuardMetrics

log = logging.getLogger(__name__)

Consume = Callable[[bytes], Awaitable[object]]
POLICY_NAME = GUARD_POLICY
RECORDED = "guard"  # the protocol its batches are counted under in the receiver's metrics


def attribute(key: str, value: Any) -> dict[str, Any]:
    if isinstance(value, list):
        items = [{"stringValue": str(v)} for v in value]
        return {"key": key, "value": {"arrayValue": {"values": items}}}
    return {"key": key, "value": {"stringValue": str(value)}}


def guard_span(
    request: GuardRequest, answer: GuardAnswer, parent: str | None, start_ns: int, end_ns: int
) -> dict[str, Any]:
    """One guard check as an OTLP/JSON span: a `policy` step (sextant.policy.*)."""
    attributes = [
        attribute("sextant.policy.decision", answer.answer.value),
        attribute("sextant.policy.name", POLICY_NAME),
        attribute("sextant.guard.tool", request.tool.name),
        attribute("sextant.guard.reasons", answer.reasons),
        attribute("sextant.guard.evidence", answer.evidence),
        attribute("sextant.guard.target_decision", answer.decision),
    ]
    if request.tool.tool_call_id:
        attributes.append(attribute("sextant.guard.tool_call_id", request.tool.tool_call_id))
    span: dict[str, Any] = {
        "traceId": request.trace_id,
        "spanId": answer.span_id,
        "name": f"guard {request.tool.name}",
        "kind": 1,
        "startTimeUnixNano": str(start_ns),
        "endTimeUnixNano": str(end_ns),
        "attributes": attributes,
        "status": {"code": 2 if answer.answer.value == "deny" else 0},
    }
    if parent:
        span["parentSpanId"] = parent
    return span


def otlp_body(spans: list[tuple[tuple[str, str | None], dict[str, Any]]]) -> bytes:
    """OTLP/JSON with one resource per (service.name, service.version)."""
    by_resource: dict[tuple[str, str | None], list[dict[str, Any]]] = defaultdict(list)
    for resource, span in spans:
        by_resource[resource].append(span)
    resource_spans = []
    for (service, version), items in by_resource.items():
        attrs = [attribute("service.name", service)]
        if version:
            attrs.append(attribute("service.version", version))
        resource_spans.append(
            {
                "resource": {"attributes": attrs},
                "scopeSpans": [{"scope": {"name": POLICY_NAME}, "spans": items}],
            }
        )
    return orjson.dumps({"resourceSpans": resource_spans})


class GuardRecorder:
    """Gathers guard steps and stores them in batches through `consume` (ingest)."""

    def __init__(
        self, consume: Consume, linger: float, max_waiting: int, metrics: GuardMetrics
    ) -> None:
        self.consume = consume
        self.linger = linger
        self.max_waiting = max_waiting
        self.metrics = metrics
        self._waiting: list[tuple[tuple[str, str | None], dict[str, Any]]] = []
        self._timer: asyncio.TimerHandle | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._last_error = ""

    def record(self, request: GuardRequest, span: dict[str, Any]) -> None:
        """On the event loop: queue one step; a batch goes out after the linger."""
        if len(self._waiting) >= self.max_waiting:
            self.metrics.dropped.labels("queue_full").inc()
            return
        self._waiting.append(((request.service, request.version), span))
        if self._timer is None:
            self._timer = asyncio.get_running_loop().call_later(self.linger, self._send)

    def _send(self) -> None:
        self._timer = None
        batch, self._waiting = self._waiting, []
        if batch:
            task = asyncio.get_running_loop().create_task(self._store(batch))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _store(self, batch: list[tuple[tuple[str, str | None], dict[str, Any]]]) -> None:
        try:
            await self.consume(otlp_body(batch))
            self._last_error = ""
        except Exception as exc:  # overloaded or stopping: the steps are lost, and counted
            self.metrics.dropped.labels("refused").inc(len(batch))
            if str(exc) != self._last_error:
                log.warning("guard steps not stored (%d): %s", len(batch), exc)
                self._last_error = str(exc)

    async def flush(self) -> None:
        """Store what waits now and wait for every batch on its way (at shutdown)."""
        if self._timer is not None:
            self._timer.cancel()
        self._send()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
