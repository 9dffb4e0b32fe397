"""Scale-out on the real OpenTelemetry Collector: the gateway (loadbalancing by service)
in front of three `sextant serve` replicas, real OTel SDK traffic from 20 services and a
support agent that writes without approval, a real Alertmanager.

Checked: every trace is stored whole on exactly one replica; each target's runs and decisions
are on one replica; `sextant sql --cluster` returns the union with each row's replica; the
QUARANTINE reaches Alertmanager once; an external evaluator's FAIL, sent as an OTLP/HTTP log
record (`POST /v1/logs`) through the gateway under the evaluated service's name, becomes a
result on the replica that holds the run, and on no other. A replica is killed (SIGKILL)
mid-load and restarted on its ports: every span the SDK saw acknowledged is stored (the
gateway's queue and retry carry what was routed to it meanwhile), and its QUARANTINE is
restored, still one alert."""

from __future__ import annotations

import json
import signal
import threading
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

import duckdb
import pytest
import requests
from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
from opentelemetry.sdk._logs import LoggerProvider, ReadableLogRecord
from opentelemetry.sdk._logs.export import (
    LogRecordExporter,
    LogRecordExportResult,
    SimpleLogRecordProcessor,
)
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

from tests.support.agents import AgentScript, booking_run
from tests.support.cli import sextant
from tests.support.cluster import Gateway, Replica, gateway_binary, replica_config
from tests.support.prometheus import alertmanager
from tests.support.wait import wait_for

SERVICES = [f"shop-{i:02d}" for i in range(20)]
PARQUET_UNION = """
SELECT regexp_extract(filename, 'exports/([^/]+)/table=', 1) AS replica, service_name,
       count(*) AS runs
FROM read_parquet('exports/*/table=trajectories/date=*/*.parquet', filename = true)
WHERE is_current GROUP BY ALL
"""
VIOLATOR = "support-desk"
ALERTMANAGER = """
route: {receiver: sink, group_by: [service, agent, version, decision], group_wait: 1s}
receivers: [{name: sink}]
"""


class Acknowledged(SpanExporter):
    """The OTLP exporter, counting the spans of every export the gateway acknowledged."""

    def __init__(self, inner: SpanExporter, seen: Counter[str], lock: threading.Lock) -> None:
        self.inner, self.seen, self.lock = inner, seen, lock

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        result = self.inner.export(spans)
        if result == SpanExportResult.SUCCESS:
            with self.lock:
                for s in spans:
                    self.seen[format(s.context.trace_id, "032x")] += 1
        return result

    def shutdown(self) -> None:
        self.inner.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self.inner.force_flush(timeout_millis)


class Agents:
    """One SDK provider per service, all exporting to the gateway."""

    def __init__(self, endpoint: str) -> None:
        self.acked: Counter[str] = Counter()
        lock = threading.Lock()
        self.providers = {}
        for service in [*SERVICES, VIOLATOR]:
            provider = TracerProvider(
                resource=Resource.create({"service.name": service, "service.version": "1.0.0"})
            )
            exporter = Acknowledged(
                OTLPSpanExporter(endpoint=endpoint, insecure=True), self.acked, lock
            )
            provider.add_span_processor(BatchSpanProcessor(exporter, schedule_delay_millis=100))
            self.providers[service] = provider

    def round(self) -> None:
        for service in SERVICES:
            booking_run(self.providers[service])
        unapproved_write(self.providers[VIOLATOR])

    def flush(self) -> None:
        for provider in self.providers.values():
            provider.force_flush()

    def shutdown(self) -> None:
        for provider in self.providers.values():
            provider.shutdown()


def unapproved_write(provider: TracerProvider) -> None:
    script = AgentScript(provider.get_tracer("support"))
    with script.agent("support-agent", "Change my e-mail", "Done."):
        script.chat([("lookup_customer", {"email": "mira@example.com"})])
        script.tool("lookup_customer", {"email": "mira@example.com"}, '{"customer": "C-1"}')
        script.chat([("update_account", {"customer": "C-1", "email": "new@example.com"})])
        script.tool("update_account", {"customer": "C-1", "email": "new@example.com"}, "ok")
        script.chat()


class Answered(LogRecordExporter):
    """The OTLP/HTTP log exporter, keeping each export's outcome."""

    def __init__(self, inner: LogRecordExporter) -> None:
        self.inner, self.results = inner, []

    def export(self, batch: Sequence[ReadableLogRecord]) -> LogRecordExportResult:
        result = self.inner.export(batch)
        self.results.append(result)
        return result

    def shutdown(self) -> None:
        self.inner.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self.inner.force_flush(timeout_millis)


def evaluator_fail(
    http_endpoint: str, trace_id: str, span_id: str, name: str, resource: Resource, **attrs: str
) -> list:
    """An external evaluator's FAIL `name` on the span `span_id` of run `trace_id`, exported as
    OTLP/HTTP logs to the gateway under `resource` with `attrs` on the record (the evaluated
    service's name on either routes it to the run's replica, as the run's spans were); returns
    the exports' outcomes."""
    logs = LoggerProvider(resource=resource)
    exporter = Answered(OTLPLogExporter(endpoint=f"http://{http_endpoint}/v1/logs", timeout=10))
    logs.add_log_record_processor(SimpleLogRecordProcessor(exporter))
    context = trace.SpanContext(
        int(trace_id, 16), int(span_id, 16), is_remote=True, trace_flags=trace.TraceFlags(1)
    )
    with trace.use_span(trace.NonRecordingSpan(context)):
        logs.get_logger("online-evals").emit(
            event_name="gen_ai.evaluation.result",
            attributes={
                "gen_ai.evaluation.name": name,
                "gen_ai.evaluation.score.value": 0.1,
                "gen_ai.evaluation.score.label": "fail",
                "gen_ai.evaluation.explanation": "changed the account without approval",
                **attrs,
            },
        )
    logs.shutdown()
    return exporter.results


def stored(replicas: list[Replica]) -> dict[str, dict[str, int]]:
    """trace id -> {replica: spans stored there}."""
    found: dict[str, dict[str, int]] = {}
    for r in replicas:
        for row in r.sql("SELECT trace_id, count(*) AS n FROM spans GROUP BY ALL"):
            found.setdefault(row["trace_id"], {})[r.name] = row["n"]
    return found


def quarantines(replica: Replica) -> list[dict]:
    reply = requests.get(
        f"{replica.url}/api/v1/decisions",
        params={"state": "firing", "decision": "QUARANTINE"},
        timeout=5,
    )
    reply.raise_for_status()
    return reply.json()["decisions"]


@pytest.fixture
def cluster(tmp_path: Path):
    binary = gateway_binary()
    (tmp_path / "am.yml").write_text(ALERTMANAGER)
    with alertmanager(tmp_path / "am.yml", tmp_path) as am:
        replicas = [
            Replica(name, tmp_path / name, replica_config(tmp_path, name, am))
            for name in ("sextant-0", "sextant-1", "sextant-2")
        ]
        for r in replicas:
            r.start(tmp_path)
        gateway = Gateway(binary, tmp_path, replicas)
        try:
            yield gateway, replicas, am
        finally:
            gateway.stop()
            for r in replicas:
                if r.process is not None and r.process.proc.poll() is None:
                    r.process.stop()


def test_the_gateway_keeps_traces_and_targets_whole_through_a_replica_crash(
    cluster: tuple[Gateway, list[Replica], str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    gateway, replicas, am = cluster
    agents = Agents(gateway.endpoint)
    agents.round()
    agents.flush()
    # The violating target is on one replica, where its QUARANTINE fires.
    owner = wait_for(lambda: next((r for r in replicas if quarantines(r)), None), timeout=30)
    (before,) = quarantines(owner)
    assert before["service_name"] == VIOLATOR

    # Load goes on while the owner is killed and started again on the same ports.
    def rounds() -> None:
        for _ in range(6):
            agents.round()
            time.sleep(0.5)

    load = threading.Thread(target=rounds)
    load.start()
    time.sleep(0.5)
    assert owner.process is not None
    owner.process.stop(signal.SIGKILL)
    owner.start(tmp_path)
    load.join(120)
    agents.flush()
    # What was routed to the owner while it was down failed there and waited in the
    # gateway's queue to be retried.
    lines = (tmp_path / "gateway.log").read_text().splitlines()
    failed = f'"endpoint": "127.0.0.1:{owner.grpc}"'
    assert any("Exporting failed" in line and failed in line for line in lines)
    assert any("Will retry the request" in line for line in lines)

    def all_stored() -> dict[str, dict[str, int]] | None:
        found = stored(replicas)
        missing = [t for t, n in agents.acked.items() if sum(found.get(t, {}).values()) < n]
        return found if not missing else None

    found = wait_for(all_stored, timeout=90, interval=0.5)
    assert len(agents.acked) == 7 * (len(SERVICES) + 1)
    for trace_id, spans in agents.acked.items():
        (where,) = found[trace_id].items()  # exactly one replica holds it ...
        assert where[1] == spans  # ... whole

    def runs() -> int:
        return sum(r.sql("SELECT count(*) AS n FROM trajectories")[0]["n"] for r in replicas)

    wait_for(lambda: runs() == len(agents.acked), timeout=60, interval=0.5)  # all assembled
    homes: dict[str, set[str]] = {}
    for r in replicas:
        for row in r.sql("SELECT DISTINCT service_name FROM trajectories"):
            homes.setdefault(row["service_name"], set()).add(r.name)
    assert set(homes) == {*SERVICES, VIOLATOR}
    assert all(len(names) == 1 for names in homes.values()), homes
    assert len({name for names in homes.values() for name in names}) > 1  # spread out

    # The owner's decision came back from its store: the same decision, firing.
    (after,) = wait_for(lambda: quarantines(owner), timeout=30)
    assert after["decision_id"] == before["decision_id"]
    assert all(not quarantines(r) for r in replicas if r is not owner)

    urls = ",".join(r.url for r in replicas)
    code, out = sextant(
        capsys, "sql", "--cluster", urls, "--format", "json",
        "SELECT service_name, count(*) AS runs FROM trajectories GROUP BY ALL",
    )  # fmt: skip
    assert code == 0, out
    rows = json.loads(out)
    assert {(row["service_name"], row["replica"]) for row in rows} == {
        (service, f"127.0.0.1:{next(r.admin for r in replicas if r.name in names)}")
        for service, names in homes.items()
    }
    assert sum(row["runs"] for row in rows) == runs()
    code, out = sextant(
        capsys, "decisions", "--cluster", urls, "--decision", "QUARANTINE", "--format", "json"
    )
    assert code == 0, out
    (listed,) = json.loads(out)["decisions"]
    assert listed["replica"] == f"127.0.0.1:{owner.admin}"
    violation = before["evidence_trace_ids"][0]
    code, out = sextant(capsys, "show", "--cluster", urls, violation)
    assert code == 0 and f"replica 127.0.0.1:{owner.admin}" in out and "update_account" in out

    def alerts() -> list[dict]:
        reply = requests.get(
            f"{am}/api/v2/alerts", params={"filter": 'decision="QUARANTINE"'}, timeout=5
        )
        return reply.json()

    (alert,) = wait_for(alerts)  # once, although the owner sent it before and after its crash
    assert alert["labels"]["service"] == VIOLATOR

    # External evaluators' FAILs on the violating run, through the gateway's logs pipeline, one
    # under a resource naming the evaluated service, one naming it on the record (its resource
    # names no service): results on the owner, beside the run; no other replica has the events.
    (root,) = owner.sql(f"SELECT root_span_id FROM trajectories WHERE trace_id = '{violation}'")
    http, span = f"127.0.0.1:{gateway.http}", root["root_span_id"]
    by_resource = Resource.create({"service.name": VIOLATOR})
    answers = evaluator_fail(http, violation, span, "policy_adherence", by_resource)
    assert answers == [LogRecordExportResult.SUCCESS]  # POST /v1/logs is routed, not a 404
    no_service = Resource({"service.namespace": "evals"})
    answers = evaluator_fail(
        http, violation, span, "approval_check", no_service, **{"service.name": VIOLATOR}
    )
    assert answers == [LogRecordExportResult.SUCCESS]
    external = (
        "SELECT rule_id, verdict, label, message, evidence_span_ids FROM results"
        f" WHERE origin = 'external' AND trace_id = '{violation}' ORDER BY rule_id"
    )

    def both() -> list[dict] | None:
        found = owner.sql(external)
        return found if len(found) == 2 else None

    results = wait_for(both, timeout=30)
    assert [(r["rule_id"], r["verdict"], r["label"]) for r in results] == [
        ("approval_check", "fail", "fail"), ("policy_adherence", "fail", "fail"),
    ]  # fmt: skip
    for r in results:
        assert r["message"] == "changed the account without approval"
        assert r["evidence_span_ids"] == [span]
    events = "SELECT count(*) AS n FROM logs WHERE event_name = 'gen_ai.evaluation.result'"
    assert {r.name: r.sql(events)[0]["n"] for r in replicas} == {
        r.name: 2 * int(r is owner) for r in replicas
    }
    agents.shutdown()

    # Every replica's Parquet export, queried together by DuckDB (the query of docs/scale-out.md).
    exports = tmp_path / "exports"
    for r in replicas:
        code, out = sextant(
            capsys, "export", "parquet", "--out", str(exports / r.name), "--url", r.url
        )
        assert code == 0, out
    union = duckdb.sql(PARQUET_UNION.replace("exports/", f"{exports}/")).fetchall()
    assert sorted(union) == sorted(
        (r.name, row["service_name"], row["runs"])
        for r in replicas
        for row in r.sql(
            "SELECT service_name, count(*) AS runs FROM trajectories WHERE is_current GROUP BY ALL"
        )
    )
