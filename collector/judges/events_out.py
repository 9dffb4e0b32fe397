"""Evaluation events out: Sextant's live results sent as `gen_ai.evaluation.result` log
records to an OTLP endpoint, so verdicts appear in any OTLP backend beside the agent's traces.

Each record is parented to the evaluated span (the result's first evidence span, else the run's
root span), named `pack/rule`, with the score, the verdict as label, the message as explanation
and the pack, its version, the rule and its reason as attributes (a reviewer's label, stored
like any result, also names its reviewer). The writer's commit hook only queues the committed
rows (bounded: past `max_queue` new ones are dropped and counted); the
`sextant-events-out` thread sends each commit's results as one OTLP request, retrying what
OTLP calls retryable with exponential backoff for up to `timeout_seconds`.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from datetime import UTC, datetime
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.logs.v1.logs_pb2 import LogRecord, SeverityNumber

from collector import __version__
from collector.config.evaluation import EvaluationEventsConfig
from collector.judges.metrics import EventMetrics
from collector.lifecycle import remaining
from collector.otlp_sender import Sender, SendError, key_values
from collector.store.database import Database
from collector.store.reader import Interrupted, Reader
from collector.threads import name_os_thread

log = logging.getLogger(__name__)
EVENT = "gen_ai.evaluation.result"
ROOTS = "SELECT trace_id, root_span_id FROM trajectories WHERE is_current AND trace_id IN ?"
COLUMNS = ["trace_id", "pack", "pack_version", "rule_id", "rule_type", "verdict", "score",
           "reason", "message", "evidence_span_ids", "requested_decision",
           "evaluated_at", "source", "reviewer"]  # fmt: skip
FIRST_RETRY_SECONDS, MAX_RETRY_SECONDS = 0.5, 8.0


def attributes_of(row: dict[str, Any]) -> dict[str, Any]:
    attrs: dict[str, Any] = {
        "gen_ai.evaluation.name": f"{row['pack']}/{row['rule_id']}",
        "gen_ai.evaluation.score.label": row["verdict"],
        "sextant.pack": row["pack"],
        "sextant.pack.version": row["pack_version"] or "",
        "sextant.rule.id": row["rule_id"],
        "sextant.rule.type": row["rule_type"] or "",
    }
    if row["score"] is not None:
        attrs["gen_ai.evaluation.score.value"] = float(row["score"])
    if row["message"]:
        attrs["gen_ai.evaluation.explanation"] = row["message"]
    if row["reason"]:
        attrs["sextant.reason"] = row["reason"]
    if row["requested_decision"]:
        attrs["sextant.decision.requested"] = row["requested_decision"]
    if row.get("source"):  # a person's label: who gave it
        attrs["sextant.result.source"] = row["source"]
        attrs["sextant.reviewer"] = row["reviewer"] or ""
    return attrs


def request_of(records: list[LogRecord]) -> ExportLogsServiceRequest:
    request = ExportLogsServiceRequest()
    resource = request.resource_logs.add()
    resource.resource.attributes.extend(
        key_values({"service.name": "sextant", "service.version": __version__})
    )
    scope = resource.scope_logs.add()
    scope.scope.name, scope.scope.version = "sextant.evaluation", __version__
    scope.log_records.extend(records)
    return request


def record_of(row: dict[str, Any], span_id: str) -> LogRecord:
    at = row["evaluated_at"]
    nanos = int(at.replace(tzinfo=UTC).timestamp() * 1e9) if at is not None else time.time_ns()
    return LogRecord(
        time_unix_nano=nanos,
        observed_time_unix_nano=time.time_ns(),
        severity_number=SeverityNumber.SEVERITY_NUMBER_INFO,
        severity_text="INFO",
        event_name=EVENT,
        attributes=key_values(attributes_of(row)),
        trace_id=bytes.fromhex(row["trace_id"]),
        span_id=bytes.fromhex(span_id),
        flags=1,
    )


class EvaluationExport:
    def __init__(
        self,
        config: EvaluationEventsConfig,
        database: Database,
        metrics: EventMetrics,
    ) -> None:
        self.config = config
        self.reader = Reader(database)
        self.sent, self.dropped = metrics.sent, metrics.dropped
        self._queue: deque[pa.Table] = deque()
        self._rows = 0
        self._cond = threading.Condition()
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None

    def consume(self, tables: dict[str, pa.Table], received_at: datetime) -> None:
        """Commit hook (the writer's thread): queue the live results worth sending."""
        results = tables.get("results")
        if self.config.endpoint is None or results is None or not results.num_rows:
            return
        keep = pc.and_(
            pc.and_(pc.equal(results["origin"], "live"), pc.is_valid(results["trace_id"])),
            pc.is_in(results["verdict"], pa.array(self.config.verdicts)),
        )
        chosen = results.filter(keep).select(COLUMNS)
        if not chosen.num_rows:
            return
        with self._cond:
            if self._rows + chosen.num_rows > self.config.max_queue:
                self.dropped.labels("queue_full").inc(chosen.num_rows)
                return
            self._queue.append(chosen)
            self._rows += chosen.num_rows
            self._cond.notify()

    def start(self) -> None:
        if self.config.endpoint is not None:
            self._thread = threading.Thread(
                target=self._run, name="sextant-events-out", daemon=True
            )
            self._thread.start()

    def shutdown(self, deadline: float) -> None:
        """Send what is queued until the deadline; what is left then is dropped and counted."""
        with self._cond:
            self._stopping.set()
            self._cond.notify()
        if self._thread is not None:
            self._thread.join(remaining(deadline))
        self.reader.stop(deadline)
        with self._cond:  # not sent before the deadline
            if self._rows:
                log.warning("evaluation events: %d results not sent before the stop", self._rows)
                self.dropped.labels("export_failed").inc(self._rows)
            self._queue.clear()
            self._rows = 0

    def threads(self) -> list[threading.Thread]:
        return [self._thread] if self._thread is not None else []

    def _run(self) -> None:
        name_os_thread("sextant-events-out")
        assert self.config.endpoint is not None
        sender = Sender(self.config.endpoint, self.config.protocol, self.config.headers, "logs")
        try:
            while True:
                with self._cond:
                    while not self._queue and not self._stopping.is_set():
                        self._cond.wait()
                    if not self._queue:
                        return
                    table = self._queue.popleft()
                    self._rows -= table.num_rows
                try:
                    records = self._records(table.to_pylist())
                    if records:
                        self._send(sender, request_of(records))
                        self.sent.inc(len(records))
                except Exception as exc:  # nothing may end the thread: count, log, go on
                    log.warning("evaluation events: %d results not sent: %s", table.num_rows, exc)
                    self.dropped.labels("export_failed").inc(table.num_rows)
        finally:
            sender.close()

    def _records(self, rows: list[dict[str, Any]]) -> list[LogRecord]:
        roots = self._roots({r["trace_id"] for r in rows if not r["evidence_span_ids"]})
        records = []
        for row in rows:
            span_id = (row["evidence_span_ids"] or [roots.get(row["trace_id"])])[0]
            if span_id is None:
                self.dropped.labels("no_span").inc()
                continue
            records.append(record_of(row, span_id))
        return records

    def _send(self, sender: Sender, request: ExportLogsServiceRequest) -> None:
        """Send, retrying what may succeed later, for at most `timeout_seconds` in all."""
        deadline = time.monotonic() + self.config.timeout_seconds
        pause = FIRST_RETRY_SECONDS
        while True:
            try:
                sender.send(request, timeout=max(0.1, deadline - time.monotonic()))
                return
            except SendError as exc:
                if not exc.retryable or time.monotonic() + pause > deadline:
                    raise
                if self._stopping.wait(pause):
                    raise
                pause = min(pause * 2, MAX_RETRY_SECONDS)

    def _roots(self, trace_ids: set[str]) -> dict[str, str]:
        if not trace_ids:
            return {}
        try:
            with self.reader.cursor() as cursor:
                return dict(cursor.execute(ROOTS, [sorted(trace_ids)]).fetchall())
        except Interrupted:
            return {}
