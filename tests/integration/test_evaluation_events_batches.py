"""Every evaluation event received becomes a result, however many one export or one commit
holds: 300 events in one OTel SDK export are 300 results, and an external evaluator's FAIL
stored in the same commit as another client's 1,000 events still fails the run and fires."""

from __future__ import annotations

import random
from pathlib import Path

from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.grpc._log_exporter import OTLPLogExporter
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import (
    BatchLogRecordProcessor,
    InMemoryLogRecordExporter,
    LogRecordExportResult,
    SimpleLogRecordProcessor,
)
from opentelemetry.sdk.resources import Resource
from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags

from tests.support.admin import firing
from tests.support.agents import AgentScript, provider_for, trace_id_of
from tests.support.server import DECIDE_FAST, FAST, RunningServer, serve
from tests.support.wait import wait_for

PACK = """
name: support-evals
version: 1.2.0
owner: support-sre
selector: {service: support-desk}
rules:
  - id: no-hallucination
    type: evaluation
    evaluation: hallucination
    fail_when: {score_lt: 0.5}
    reason: hallucinated_answer
    on_fail: QUARANTINE
"""
EVENT = "gen_ai.evaluation.result"


def stored_run(server: RunningServer) -> tuple[str, SpanContext]:
    """A support run, once stored: its trace id and its chat span."""
    provider = provider_for(
        OTLPSpanExporter(endpoint=server.grpc_endpoint, insecure=True), service="support-desk"
    )
    tracer = provider.get_tracer("support")
    script = AgentScript(tracer)
    with (
        script.agent("support-agent", "Where is my parcel?", "It is on the moon.") as root,
        tracer.start_as_current_span("chat gpt-4.1-mini") as chat,
    ):
        chat.set_attribute("gen_ai.operation.name", "chat")
    provider.shutdown()
    trace_id = trace_id_of(root)
    wait_for(lambda: server.query("SELECT 1 FROM trajectories WHERE trace_id = ?", [trace_id]))
    return trace_id, chat.get_span_context()


def on_span(context: SpanContext) -> trace.Span:
    return NonRecordingSpan(context)


def other_span() -> SpanContext:
    """A span of some other client's trace, which this store has no run of."""
    return SpanContext(
        random.getrandbits(128), random.getrandbits(64), False, TraceFlags(TraceFlags.SAMPLED)
    )


def test_a_300_event_export_is_300_results(tmp_path: Path) -> None:
    server = serve(tmp_path, {"evals": PACK}, assembler=FAST, judges={"tick_seconds": 0.05})
    try:
        trace_id, chat = stored_run(server)
        logs = LoggerProvider(resource=Resource.create({"service.name": "support-evaluator"}))
        exporter = OTLPLogExporter(endpoint=server.grpc_endpoint, insecure=True)
        # One export request for all of them (the batch is larger than the events).
        logs.add_log_record_processor(
            BatchLogRecordProcessor(
                exporter, max_queue_size=4096, max_export_batch_size=1024, schedule_delay_millis=6e4
            )
        )
        evaluator = logs.get_logger("online-evals")
        with trace.use_span(on_span(chat)):
            for i in range(300):
                evaluator.emit(
                    event_name=EVENT,
                    attributes={
                        "gen_ai.evaluation.name": f"check-{i:03d}",
                        "gen_ai.evaluation.score.value": 1.0,
                        "gen_ai.evaluation.score.label": "pass",
                    },
                )
        assert logs.force_flush()
        logs.shutdown()
        # One request, one commit: the 300 records share their received_at.
        assert server.query("SELECT count(*), count(DISTINCT received_at) FROM logs") == [(300, 1)]

        def results() -> int:
            found = "SELECT count(*) FROM results WHERE origin = 'external' AND trace_id = ?"
            return int(server.query(found, [trace_id])[0][0])

        wait_for(lambda: results() == 300 or None, timeout=20)
        names = server.query(
            "SELECT count(DISTINCT rule_id) FROM results WHERE origin = 'external'"
        )
        assert names == [(300,)]
    finally:
        server.stop()


def test_a_fail_sharing_a_commit_with_1000_other_events_is_applied(tmp_path: Path) -> None:
    server = serve(
        tmp_path,
        {"evals": PACK},
        assembler=FAST,
        judges={"tick_seconds": 0.05},
        decisions=DECIDE_FAST,
    )
    try:
        trace_id, chat = stored_run(server)
        captured = InMemoryLogRecordExporter()
        bulk = LoggerProvider(resource=Resource.create({"service.name": "bulk-evaluator"}))
        ours = LoggerProvider(resource=Resource.create({"service.name": "support-evaluator"}))
        for provider in (bulk, ours):
            provider.add_log_record_processor(SimpleLogRecordProcessor(captured))
        other = bulk.get_logger("offline-evals")
        for _ in range(1000):
            with trace.use_span(on_span(other_span())):
                other.emit(
                    event_name=EVENT,
                    attributes={
                        "gen_ai.evaluation.name": "tone",
                        "gen_ai.evaluation.score.value": 1,
                    },
                )
        with trace.use_span(on_span(chat)):
            ours.get_logger("online-evals").emit(
                event_name=EVENT,
                attributes={
                    "gen_ai.evaluation.name": "hallucination",
                    "gen_ai.evaluation.score.value": 0.2,
                    "gen_ai.evaluation.score.label": "fail",
                    "gen_ai.evaluation.explanation": "the parcel is not on the moon",
                },
            )
        records = captured.get_finished_logs()
        assert len(records) == 1001
        # Both clients' records in one OTLP request (one resource each): one commit.
        exporter = OTLPLogExporter(endpoint=server.grpc_endpoint, insecure=True)
        assert exporter.export(records) == LogRecordExportResult.SUCCESS
        exporter.shutdown()
        assert server.query("SELECT count(*), count(DISTINCT received_at) FROM logs") == [(1001, 1)]

        rule = wait_for(
            lambda: server.query_dicts(
                "SELECT * FROM results WHERE rule_id = 'no-hallucination' AND trace_id = ?",
                [trace_id],
            ),
            timeout=20,
        )[0]
        assert (rule["verdict"], rule["reason"]) == ("fail", "hallucinated_answer")
        external = server.query_dicts(
            "SELECT * FROM results WHERE origin = 'external' AND rule_id = 'hallucination'"
        )
        assert [(r["trace_id"], r["label"]) for r in external] == [(trace_id, "fail")]
        decision = firing(server, "QUARANTINE", service_name="support-desk")
        assert trace_id in decision["evidence_trace_ids"]
    finally:
        server.stop()
