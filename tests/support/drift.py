"""Agent runs for drift and reliability tests, sent through the real OTel SDK in batches, and a
server that evaluates one pack's window rules."""

from __future__ import annotations

from pathlib import Path

from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

from tests.support.agents import AgentScript, trace_id_of
from tests.support.server import FAST, RunningServer, serve


def serve_pack(tmp_path: Path, name: str, pack: str) -> RunningServer:
    """A server evaluating only this pack, with window rules checked every 0.1 s."""
    return serve(tmp_path, {name: pack}, assembler=FAST, drift={"tick_seconds": 0.1})


def batch_provider(endpoint: str, service: str, version: str) -> TracerProvider:
    provider = TracerProvider(
        resource=Resource.create({"service.name": service, "service.version": version})
    )
    provider.add_span_processor(
        BatchSpanProcessor(OTLPSpanExporter(endpoint=endpoint, insecure=True))
    )
    return provider


def send_runs(
    endpoint: str,
    service: str,
    version: str,
    tools: list[list[str]],
    case_ids: list[str | None] | None = None,
) -> list[str]:
    """One run per entry of `tools` (the tools it calls, in order); returns the trace ids."""
    provider = batch_provider(endpoint, service, version)
    script = AgentScript(provider.get_tracer("drift-test"))
    trace_ids = []
    for i, calls in enumerate(tools):
        case = (case_ids or [None] * len(tools))[i]
        trace_ids.append(one_run(script, i, calls, case))
    provider.shutdown()
    return trace_ids


def send_alternating(
    endpoint: str,
    service: str,
    versions: tuple[str, str],
    tools: tuple[list[str], list[str]],
    runs: int,
) -> tuple[list[str], list[str]]:
    """`runs` runs of each version taking turns, each exported before the next, as a canary's
    traffic arrives beside production's; returns each version's trace ids."""
    providers = [batch_provider(endpoint, service, version) for version in versions]
    scripts = [AgentScript(p.get_tracer("drift-test")) for p in providers]
    sent: tuple[list[str], list[str]] = ([], [])
    for i in range(runs):
        for side in (0, 1):
            sent[side].append(one_run(scripts[side], i, tools[side], None))
            providers[side].force_flush()
    for provider in providers:
        provider.shutdown()
    return sent


def one_run(script: AgentScript, i: int, calls: list[str], case: str | None) -> str:
    attrs = {"sextant.case.id": case} if case else {}
    with script.agent("travel-agent", f"Book trip {i}", "Booked.", **attrs) as root:
        for tool in calls:
            script.chat([(tool, {"trip": i})])
            script.tool(tool, {"trip": i}, "ok")
        script.chat()
    return trace_id_of(root)
