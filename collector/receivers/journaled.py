"""A journal frame decoded again at start: what a previous run acknowledged but had not loaded.

Every frame decoded when it was acknowledged, so one that no longer decodes whole (a decoder
changed between the two runs) is not dropped whole: a protobuf frame is the export requests
joined at that moment (collector/receivers/coalesce.py), each a run of top-level fields, so it is
decoded again resource by resource and only the resources that no longer decode are lost, each
logged with the frame's sequence number. A JSON frame is one request: it decodes or it is lost.
"""

from __future__ import annotations

import logging

import pyarrow as pa

from collector.errors import MalformedRequest
from collector.normalize.wire import decode_request
from collector.receivers.coalesce import split_fields
from collector.store.journal import Frame

log = logging.getLogger(__name__)


def decode_journaled(frame: Frame) -> pa.Table | None:
    """The frame's rows, those of every resource that still decodes; None when none does."""
    try:
        return decode(frame, frame.payload)
    except MalformedRequest as exc:
        parts = split_fields(frame.payload) if frame.encoding == "protobuf" else None
        if not parts or len(parts) == 1:
            log.error("journal frame %d no longer decodes, skipped: %s", frame.seq, exc)
            return None
    tables, lost = [], 0
    for part in parts:
        try:
            table = decode(frame, part)
        except MalformedRequest as exc:
            lost += 1
            log.error(
                "journal frame %d: a resource (%d bytes) no longer decodes, skipped: %s",
                frame.seq,
                len(part),
                exc,
            )
            continue
        if table is not None:
            tables.append(table)
    log.error(
        "journal frame %d no longer decodes whole: %d of its %d resources loaded",
        frame.seq,
        len(parts) - lost,
        len(parts),
    )
    return pa.concat_tables(tables) if tables else None


def decode(frame: Frame, payload: bytes) -> pa.Table | None:
    return decode_request(frame.signal, frame.encoding, payload, frame.max_attribute_length).table
