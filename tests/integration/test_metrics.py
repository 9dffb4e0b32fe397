"""What an SRE reads on /metrics after real agent traffic: per-target runs, the build, the process,
the store; no `_created` series; and a dashboard whose every query runs on real Prometheus."""

from __future__ import annotations

import json
import re
from pathlib import Path

import requests
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from prometheus_client.parser import text_string_to_metric_families

import collector
from tests.support.admin import firing, trajectory
from tests.support.agents import AgentScript, provider_for, support_run, trace_id_of
from tests.support.prometheus import prometheus
from tests.support.server import RunningServer
from tests.support.wait import eventually, wait_for

DASHBOARD = Path(__file__).resolve().parents[2] / "deploy/grafana/dashboards/sextant.json"
SUPPORT = {"service": "support-desk", "agent": "support-agent", "version": "2.3.1"}
TRAVEL = {"service": "travel-desk", "agent": "travel-agent", "version": "2.3.1"}
# What PromQL puts around metric names; what is left of an expression's words are metric names.
PROMQL_WORDS = {
    "sum", "rate", "increase", "histogram_quantile", "by", "without", "on", "ignoring", "and",
    "or", "unless", "group_left", "group_right", "bool", "offset", "max", "min", "avg", "count",
    "label_values", "last_over_time",
}  # fmt: skip


def scrape(server: RunningServer, accept: str = "") -> str:
    reply = requests.get(f"{server.admin_url}/metrics", headers={"Accept": accept}, timeout=10)
    reply.raise_for_status()
    return reply.text


def samples(text: str) -> dict[tuple[str, frozenset], float]:
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def exposed_names(text: str) -> set[str]:
    """Every sample name /metrics announces, whether or not it has a sample yet (a histogram
    with labels has none before its first observation)."""
    suffixes = {
        "counter": ["_total"],
        "histogram": ["_bucket", "_sum", "_count"],
        "info": ["_info"],
    }
    return {
        family.name + suffix
        for family in text_string_to_metric_families(text)
        for suffix in suffixes.get(family.type, [""])
    }


def value(text: str, name: str, **labels: str) -> float | None:
    return samples(text).get((name, frozenset(labels.items())))


def failing_tool_run(server: RunningServer) -> str:
    provider = provider_for(OTLPSpanExporter(endpoint=server.grpc_endpoint, insecure=True))
    script = AgentScript(provider.get_tracer("travel"))
    with script.agent("travel-agent", "Book LIS-OSL", "Sorry.") as root:
        script.chat([("search_flights", {"origin": "LIS"})])
        script.tool("search_flights", {"origin": "LIS"}, error="timeout")
        script.chat()
    provider.shutdown()
    return trace_id_of(root)


def traffic(server: RunningServer) -> list[dict]:
    """Two good support runs, one without approval (QUARANTINE), one travel run whose tool fails."""
    ids = [support_run(server), support_run(server), support_run(server, approve=False)]
    ids.append(failing_tool_run(server))
    return [trajectory(server, i) for i in ids]


def test_per_target_metrics_after_real_traffic(deciding_server: RunningServer) -> None:
    runs = traffic(deciding_server)
    firing(deciding_server, "QUARANTINE", service_name="support-desk")
    support = [t for t in runs if t["service_name"] == "support-desk"]
    verdicts = [t["verdict"] for t in support]

    def counted() -> str:
        """A scrape that counts every run (a stored batch is counted just after its commit)."""
        text = scrape(deciding_server)
        for verdict in ("pass", "fail"):
            found = value(text, "sextant_target_runs_total", **SUPPORT, verdict=verdict)
            assert found == verdicts.count(verdict), verdict
        assert value(text, "sextant_target_runs_total", **SUPPORT, verdict="review") == 0
        assert value(text, "sextant_target_run_duration_seconds_count", **SUPPORT) == len(support)
        seconds = sum(t["duration_ms"] for t in support) / 1000
        duration = value(text, "sextant_target_run_duration_seconds_sum", **SUPPORT)
        assert abs(duration - seconds) < 1e-6
        tokens = sum(t["input_tokens"] for t in support)
        assert tokens > 0
        assert value(text, "sextant_target_tokens_total", **SUPPORT, type="input") == tokens
        output = sum(t["output_tokens"] for t in support)
        assert value(text, "sextant_target_tokens_total", **SUPPORT, type="output") == output
        cost = sum(t["cost_usd"] or 0 for t in support)
        assert abs(value(text, "sextant_target_cost_usd_total", **SUPPORT) - cost) < 1e-9
        assert value(text, "sextant_target_tool_errors_total", **SUPPORT) == 0
        assert value(text, "sextant_target_tool_errors_total", **TRAVEL) == 1
        return text

    text = eventually(counted)
    # The decisions table's row: why and whose, on the same target labels.
    info = [
        dict(labels)
        for (name, labels), v in samples(text).items()
        if name == "sextant_decision_info" and v == 1
    ]
    quarantine = next(i for i in info if i["decision"] == "QUARANTINE")
    assert quarantine["service"] == "support-desk"
    assert "approval_boundary_violation" in quarantine["reasons"].split(",")
    assert quarantine["owner"]
    # ... and the decision the dashboard's row opens in the console
    page = requests.get(
        f"{deciding_server.admin_url}/decisions/{quarantine['decision_id']}", timeout=10
    )
    assert page.status_code == 200 and "QUARANTINE" in page.text
    strength = value(text, "sextant_target_decision_strength", **SUPPORT)
    assert strength is not None and strength >= 4  # QUARANTINE or stronger, no decision label


def test_build_process_and_store_metrics_and_no_created_series(
    deciding_server: RunningServer,
) -> None:
    traffic(deciding_server)
    for accept in ("", "application/openmetrics-text; version=1.0.0"):
        text = scrape(deciding_server, accept)
        created = [line for line in text.splitlines() if "_created" in line.split(" ")[0]]
        assert created == [], accept
    text = scrape(deciding_server)
    build = [dict(lbl) for (n, lbl), _ in samples(text).items() if n == "sextant_build_info"]
    assert len(build) == 1 and build[0]["version"] == collector.__version__
    assert set(build[0]) == {"version", "python", "duckdb"}
    assert (value(text, "process_resident_memory_bytes") or 0) > 0
    assert value(text, "process_start_time_seconds")
    assert any(n == "python_info" for n, _ in samples(text))
    database = value(text, "sextant_store_size_bytes", file="database")
    wal = value(text, "sextant_store_size_bytes", file="wal")
    assert database is not None and wal is not None and database + wal > 0
    path = deciding_server.pipeline.database.path
    assert database == path.stat().st_size


def dashboard_queries() -> tuple[list[str], list[str]]:
    """The panels' expressions and the variables' queries of the shipped dashboard."""
    board = json.loads(DASHBOARD.read_text())
    exprs = [t["expr"] for p in board["panels"] for t in p.get("targets", [])]
    queries = [v["query"]["query"] for v in board["templating"]["list"] if v["type"] == "query"]
    return exprs, queries


def metric_names(expr: str) -> set[str]:
    bare = re.sub(r'"[^"]*"', "", expr)  # label values
    bare = re.sub(r"\{[^}]*\}|\[[^\]]*\]", "", bare)  # matchers, ranges
    bare = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", "", bare)
    bare = re.sub(r"label_values\(([a-z_:]+)\s*,\s*[a-z_]+\)", r"\1", bare)
    words = set(re.findall(r"\b[a-zA-Z_:][a-zA-Z0-9_:]*\b", bare))
    return words - PROMQL_WORDS


def test_the_dashboard_has_the_target_variables_and_uses_only_exposed_metrics(
    deciding_server: RunningServer,
) -> None:
    board = json.loads(DASHBOARD.read_text())
    variables = {v["name"]: v for v in board["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource"
    assert variables["datasource"]["query"] == "prometheus"
    for name in ("service", "agent", "version"):
        assert variables[name]["multi"] and variables[name]["includeAll"], name
    per_target = [p for p in board["panels"] if "sextant_target_" in json.dumps(p.get("targets"))]
    assert len(per_target) >= 6
    for panel in per_target:
        assert all('service=~"$service"' in t["expr"] for t in panel["targets"]), panel["title"]
    panels = [p for p in board["panels"] if p["type"] != "row"]
    assert all(p["datasource"]["uid"] == "${datasource}" for p in panels)
    # every replica's process panels, whatever the scrape job is called
    assert variables["job"]["query"]["query"] == "label_values(sextant_build_info, job)"
    assert "job=" not in json.dumps(board).replace('job=~\\"$job\\"', "")
    assert sum('job=~"$job"' in expr for expr in dashboard_queries()[0]) == 3
    # each firing decision's row opens that decision's page
    (decisions,) = [p for p in panels if p["title"].startswith("Decisions firing")]
    links = [
        link["url"]
        for o in decisions["fieldConfig"]["overrides"]
        if o["matcher"]["options"] == "decision"
        for prop in o["properties"]
        if prop["id"] == "links"
        for link in prop["value"]
    ]
    assert links == ["${admin_url}/decisions/${__data.fields.decision_id}"]
    traffic(deciding_server)
    exposed = exposed_names(scrape(deciding_server))
    exprs, queries = dashboard_queries()
    for expr in exprs + queries:
        unknown = metric_names(expr) - exposed
        assert not unknown, f"{expr!r} uses {sorted(unknown)}, not on /metrics"


def grafana_to_promql(expr: str) -> str:
    """A dashboard expression with its variables as Grafana fills them for 'All'."""
    return (
        (expr.replace("$__rate_interval", "1m").replace("$service", ".*").replace("$agent", ".*"))
        .replace("$version", ".*")
        .replace("$job", ".*")
    )


def test_every_dashboard_query_runs_on_prometheus_and_the_target_panels_have_data(
    deciding_server: RunningServer, tmp_path: Path
) -> None:
    traffic(deciding_server)
    firing(deciding_server, "QUARANTINE", service_name="support-desk")
    with prometheus(tmp_path, deciding_server.admin_url.removeprefix("http://")) as prom:
        wait_for(lambda: prom.query("sextant_target_runs_total"), timeout=30)
        exprs, queries = dashboard_queries()
        wait_for(lambda: prom.query(grafana_to_promql(exprs[0])), timeout=30)  # two scrapes
        for expr in exprs:
            prom.query(grafana_to_promql(expr))  # asserts that Prometheus accepts it
        for expr in exprs:
            if "sextant_target_runs_total" in expr or "sextant_decision_info" in expr:
                assert prom.query(grafana_to_promql(expr)), expr
        for query in queries:
            metric, label = re.fullmatch(r"label_values\((\w+).*, (\w+)\)", query).groups()
            reply = requests.get(
                f"{prom.url}/api/v1/label/{label}/values", params={"match[]": metric}, timeout=5
            ).json()
            assert reply["data"], query
