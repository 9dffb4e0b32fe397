"""Rejected spans are counted by the service that sent them, where its resource names one."""

from __future__ import annotations

import orjson

from collector.normalize.wire import decode_request


def resource_spans(service: str | None, *span_ids: str) -> dict:
    spans = [{"traceId": "ab" * 16, "spanId": sid, "name": "s"} for sid in span_ids]
    attrs = [{"key": "service.name", "value": {"stringValue": service}}] if service else []
    return {"resource": {"attributes": attrs}, "scopeSpans": [{"spans": spans}]}


def test_rejections_are_counted_by_the_resources_service_name() -> None:
    request = {
        "resourceSpans": [
            resource_spans("support-desk", "00" * 8, "01" * 8, "abc"),
            resource_spans("travel-desk", "02" * 8),
            resource_spans(None, "00" * 8),
        ]
    }
    decoded = decode_request("traces", "json", orjson.dumps(request), 4096)
    assert decoded.rows == 2
    assert decoded.rejected == {"invalid_span_id": 3}
    assert decoded.rejected_by_service == {"support-desk": 2, "": 1}
