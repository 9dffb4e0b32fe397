"""Evaluation events in and out: `gen_ai.evaluation.result` records sent with the OTel SDK
become results (and decisions, through an `evaluation` rule), and Sextant's own results reach a
second real OTLP receiver (another Sextant) as evaluation events parented to the evaluated span."""

from __future__ import annotations

import json
import socket
import time
from pathlib import Path

from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.grpc._log_exporter import OTLPLogExporter
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import SimpleLogRecordProcessor
from opentelemetry.sdk.resources import Resource

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
  - id: looks-the-customer-up
    type: presence
    reason: no_lookup
    step: {kind: tool, name: lookup_customer}
"""


def evaluated_run(server: RunningServer) -> tuple[str, str]:
    """A support run whose answer an evaluator scores with two events on the chat span: one
    sent while the run is still open, one after it was stored. Returns (trace id, chat span)."""
    provider = provider_for(
        OTLPSpanExporter(endpoint=server.grpc_endpoint, insecure=True), service="support-desk"
    )
    logs = LoggerProvider(resource=Resource.create({"service.name": "support-evaluator"}))
    logs.add_log_record_processor(
        SimpleLogRecordProcessor(OTLPLogExporter(endpoint=server.grpc_endpoint, insecure=True))
    )
    evaluator = logs.get_logger("online-evals")
    tracer = provider.get_tracer("support")
    script = AgentScript(tracer)
    with script.agent("support-agent", "Where is my parcel?", "It is on the moon.") as root:
        script.tool("lookup_customer", {"customer": "C-1"}, "parcel P-7 left the depot")
        with tracer.start_as_current_span("chat gpt-4.1-mini") as chat:
            chat.set_attribute("gen_ai.operation.name", "chat")
            evaluator.emit(
                event_name="gen_ai.evaluation.result",
                attributes={
                    "gen_ai.evaluation.name": "relevance",
                    "gen_ai.evaluation.score.value": 0.9,
                    "gen_ai.evaluation.score.label": "pass",
                },
            )
    provider.shutdown()
    trace_id = trace_id_of(root)
    wait_for(lambda: server.query("SELECT 1 FROM trajectories WHERE trace_id = ?", [trace_id]))
    with trace.use_span(trace.NonRecordingSpan(chat.get_span_context())):
        evaluator.emit(
            event_name="gen_ai.evaluation.result",
            attributes={
                "gen_ai.evaluation.name": "hallucination",
                "gen_ai.evaluation.score.value": 0.2,
                "gen_ai.evaluation.score.label": "fail",
                "gen_ai.evaluation.explanation": "the parcel is not on the moon",
            },
        )
    logs.shutdown()
    return trace_id, format(chat.get_span_context().span_id, "016x")


def test_evaluation_events_round_trip(tmp_path: Path) -> None:
    receiver = serve(tmp_path / "receiver")
    sender = serve(
        tmp_path / "sender",
        {"evals": PACK},
        assembler=FAST,
        judges={"tick_seconds": 600},
        decisions=DECIDE_FAST,
        evaluation_events={"endpoint": f"http://{receiver.grpc_endpoint}"},
    )
    try:
        trace_id, chat = evaluated_run(sender)

        # In: both events are results of origin `external`, on the evaluated span.
        external = wait_for(
            lambda: (
                sender.query_dicts(
                    "SELECT * FROM results WHERE origin = 'external' AND trace_id = ?"
                    " ORDER BY rule_id",
                    [trace_id],
                )
                if len(sender.query("SELECT 1 FROM results WHERE origin = 'external'")) == 2
                else None
            )
        )
        hallucination, relevance = external
        assert (hallucination["pack"], hallucination["rule_id"]) == ("external", "hallucination")
        assert (hallucination["score"], hallucination["label"]) == (0.2, "fail")
        assert hallucination["message"] == "the parcel is not on the moon"
        assert hallucination["evidence_span_ids"] == [chat]
        assert (relevance["verdict"], relevance["score"]) == ("pass", 0.9)

        # ... and the rule that names it fails the run, which a decision takes up.
        rule = wait_for(
            lambda: sender.query_dicts(
                "SELECT * FROM results WHERE rule_id = 'no-hallucination' AND trace_id = ?",
                [trace_id],
            )
        )[0]
        assert (rule["verdict"], rule["reason"]) == ("fail", "hallucinated_answer")
        assert rule["requested_decision"] == "QUARANTINE" and rule["origin"] == "live"
        decision = firing(sender, "QUARANTINE", service_name="support-desk")
        assert trace_id in decision["evidence_trace_ids"]

        # Out: the live results arrive at the receiver as evaluation events on their spans.
        def received() -> dict | None:
            rows = receiver.query_dicts(
                "SELECT * FROM logs WHERE trace_id = ? AND event_name = 'gen_ai.evaluation.result'",
                [trace_id],
            )
            by_name = {json.loads(r["attributes"])["gen_ai.evaluation.name"]: r for r in rows}
            wanted = {"support-evals/no-hallucination", "support-evals/looks-the-customer-up"}
            return by_name if wanted <= set(by_name) else None

        events = wait_for(received, timeout=20)
        sent = events["support-evals/no-hallucination"]
        attrs = json.loads(sent["attributes"])
        assert sent["span_id"] == chat  # parented to the span the evaluation was about
        assert attrs["gen_ai.evaluation.score.label"] == "fail"
        assert attrs["gen_ai.evaluation.explanation"].startswith("hallucination: fail (0.2)")
        assert attrs["sextant.pack"] == "support-evals"
        assert attrs["sextant.pack.version"] == "1.2.0"
        assert attrs["sextant.rule.id"] == "no-hallucination"
        assert attrs["sextant.decision.requested"] == "QUARANTINE"
        assert sent["service_name"] == "sextant"
        lookup = events["support-evals/looks-the-customer-up"]
        assert json.loads(lookup["attributes"])["gen_ai.evaluation.score.label"] == "pass"
        steps = sender.query(
            "SELECT span_id FROM steps WHERE trace_id = ? AND tool_name = 'lookup_customer'",
            [trace_id],
        )
        root = sender.query("SELECT root_span_id FROM trajectories WHERE trace_id = ?", [trace_id])
        assert lookup["span_id"] in {steps[0][0], root[0][0]}
        assert sender.metric("sextant_evaluation_events_sent_total") >= 2
    finally:
        sender.stop()
        receiver.stop()

    # After a restart the same events are looked at again (lookback) and not taken twice.
    again = serve(tmp_path / "sender", {"evals": PACK}, judges={"tick_seconds": 600})
    try:
        time.sleep(1)  # twenty looks
        assert again.query("SELECT count(*) FROM results WHERE origin = 'external'") == [(2,)]
        rule_results = "SELECT count(*) FROM results WHERE rule_id = 'no-hallucination'"
        assert again.query(rule_results) == [(1,)]
    finally:
        again.stop()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_events_out_are_retried_until_the_receiver_is_up(tmp_path: Path) -> None:
    """Nothing listens at first (connection refused is retryable): the results are sent once
    the receiver starts, within the timeout, over OTLP/HTTP."""
    port = free_port()
    sender = serve(
        tmp_path / "sender",
        {"evals": PACK},
        assembler=FAST,
        evaluation_events={
            "endpoint": f"http://127.0.0.1:{port}",
            "protocol": "http/protobuf",
            "timeout_seconds": 30,
        },
    )
    receiver = None
    try:
        provider = provider_for(
            OTLPSpanExporter(endpoint=sender.grpc_endpoint, insecure=True), service="support-desk"
        )
        script = AgentScript(provider.get_tracer("support"))
        with script.agent("support-agent", "Where is my parcel?", "Arriving today.") as root:
            script.tool("lookup_customer", {"customer": "C-1"}, "parcel P-7 left the depot")
        provider.shutdown()
        trace_id = trace_id_of(root)
        wait_for(lambda: sender.query("SELECT 1 FROM results WHERE trace_id = ?", [trace_id]))
        time.sleep(1)  # a retry or two against nothing
        assert sender.metric("sextant_evaluation_events_sent_total") == 0
        receiver = serve(tmp_path / "receiver", http={"addr": f"127.0.0.1:{port}"})
        rows = wait_for(
            lambda: receiver.query("SELECT attributes FROM logs WHERE trace_id = ?", [trace_id]),
            timeout=20,
        )
        names = {json.loads(r[0])["gen_ai.evaluation.name"] for r in rows}
        assert names == {"support-evals/looks-the-customer-up"}
        assert (
            sender.metric("sextant_evaluation_events_dropped_total", {"reason": "export_failed"})
            == 0
        )
    finally:
        sender.stop()
        if receiver is not None:
            receiver.stop()
