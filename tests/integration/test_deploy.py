"""deploy/ is checked by the real tools, and references only metrics Sextant exports."""

from __future__ import annotations

import copy
import json
import re
import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import requests
import yaml

from collector.config import load_config
from collector.pipeline import Pipeline
from tests.support.binaries import binary
from tests.support.paths import DEPLOY, TESTDATA
from tests.support.prometheus import alert_sink, alertmanager, stop
from tests.support.wait import wait_for

ALERTMANAGER = DEPLOY / "alertmanager/alertmanager.yml"
METRIC = re.compile(r"\b(sextant_[a-z0-9_]+)")
RECORDED = re.compile(r"\b(sextant:[a-z0-9_:]+)")


def check(*args: str) -> None:
    done = subprocess.run(args, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr


def exported_names(tmp_path: Path) -> set[str]:
    """Every sample name the registry can expose, whether or not it has been observed yet."""
    config = load_config(None, environ={}, overrides={"storage": {"data_dir": str(tmp_path)}})
    names = set()
    for family in Pipeline(config).registry.collect():
        suffixes = {
            "counter": ["_total"],
            "histogram": ["_bucket", "_sum", "_count"],
            "info": ["_info"],
            "gauge": [""],
        }.get(family.type, [""])
        names.update(family.name + s for s in suffixes)
    return names


def expressions() -> dict[str, list[str]]:
    dashboard = json.loads((DEPLOY / "grafana/dashboards/sextant.json").read_text())
    found = {
        "dashboard": [t["expr"] for p in dashboard["panels"] for t in p.get("targets", [])],
        "rules": [],
        "argo": [],
    }
    for path in (DEPLOY / "prometheus").glob("*.rules.yml"):
        for group in yaml.safe_load(path.read_text())["groups"]:
            found["rules"] += [r["expr"] for r in group["rules"]]
    argo = yaml.safe_load((DEPLOY / "argo/analysis-template.yaml").read_text())
    found["argo"] = [m["provider"]["prometheus"]["query"] for m in argo["spec"]["metrics"]]
    return found


def test_promtool_accepts_the_prometheus_config_and_rules():
    promtool = binary("promtool")
    check(promtool, "check", "config", str(DEPLOY / "prometheus/prometheus.yml"))
    check(promtool, "check", "rules", *map(str, (DEPLOY / "prometheus").glob("*.rules.yml")))


def test_promtool_unit_tests_of_the_rules_pass():
    """Health alerts fire on a single burst; the decision alert holds through an outage and a
    restart (tests/testdata/prometheus)."""
    tests = sorted((TESTDATA / "prometheus").glob("*.test.yml"))
    assert tests
    check(binary("promtool"), "test", "rules", *map(str, tests))


def test_amtool_accepts_the_alertmanager_config():
    check(binary("amtool"), "check-config", str(ALERTMANAGER))


def test_dashboard_rules_and_argo_use_only_metrics_sextant_exports(tmp_path):
    exported = exported_names(tmp_path)
    assert "sextant_decision_state" in exported
    assert "sextant_evaluator_results_total" in exported
    recorded = {
        r["record"]
        for group in yaml.safe_load(
            (DEPLOY / "prometheus/sextant-recording.rules.yml").read_text()
        )["groups"]
        for r in group["rules"]
    }
    for where, exprs in expressions().items():
        assert exprs, where
        for expr in exprs:
            unknown = set(METRIC.findall(expr)) - exported
            assert not unknown, f"{where}: {expr!r} uses {sorted(unknown)}"
            missing = set(RECORDED.findall(expr)) - recorded
            assert not missing, f"{where}: {expr!r} uses unrecorded {sorted(missing)}"


def webhook_urls(config: dict) -> list[str]:
    return [w["url"] for r in config["receivers"] for w in r.get("webhook_configs", [])]


def test_the_compose_stack_wires_every_service_and_mounts_files_that_exist():
    compose = yaml.safe_load((DEPLOY / "docker-compose.yml").read_text())
    services = compose["services"]
    assert set(services) == {
        *("gateway", "sextant-a", "sextant-b"),
        *("prometheus", "alertmanager", "grafana", "alert-sink"),
    }
    # the gateway routes to the compose replicas, on their OTLP port
    gateway = yaml.safe_load((DEPLOY / "gateway/gateway.yaml").read_text())
    hostnames = gateway["exporters"]["load_balancing"]["resolver"]["static"]["hostnames"]
    assert hostnames == ["sextant-a:4317", "sextant-b:4317"]
    assert all(f"{h.split(':')[0]}" in services for h in hostnames)
    # Alertmanager's receivers are the compose sink, on the port it listens on
    sink = services["alert-sink"]["command"]
    assert sink[:2] == ["alerts", "sink"]
    listens = int(sink[sink.index("--addr") + 1].rpartition(":")[2])
    urls = webhook_urls(yaml.safe_load(ALERTMANAGER.read_text()))
    assert urls
    assert {(urlsplit(u).hostname, urlsplit(u).port) for u in urls} == {("alert-sink", listens)}
    for service in services.values():
        for volume in service.get("volumes", []):
            source = volume.split(":")[0]
            if source.startswith("."):
                assert (DEPLOY / source).exists(), source
    sextant = yaml.safe_load((DEPLOY / "sextant.yaml").read_text())
    load_config(None, environ={}, overrides=sextant)  # the compose config is a valid config


KUBERNETES_VERSION = "1.33"


def manifests() -> dict[tuple[str, str], dict]:
    """(kind, name) -> each document of deploy/kubernetes/*.yaml."""
    docs = {}
    for path in sorted((DEPLOY / "kubernetes").glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            docs[(doc["kind"], doc["metadata"]["name"])] = doc
    return docs


def test_the_kubernetes_manifests_are_valid_and_wired_to_each_other():
    import kubernetes_validate

    docs = manifests()
    for doc in docs.values():
        kubernetes_validate.validate(doc, KUBERNETES_VERSION, strict=True)
    replicas = docs[("StatefulSet", "sextant")]
    broken = copy.deepcopy(replicas)
    broken["spec"]["template"]["spec"]["containers"][0]["readinessprobe"] = {}
    with pytest.raises(kubernetes_validate.ValidationError):  # a typo does not pass
        kubernetes_validate.validate(broken, KUBERNETES_VERSION, strict=True)
    # The gateway resolves the headless Service that the StatefulSet names.
    headless = docs[("Service", replicas["spec"]["serviceName"])]
    assert headless["spec"]["clusterIP"] == "None"
    config = docs[("ConfigMap", "sextant-gateway")]
    gateway = yaml.safe_load(config["data"]["gateway.yaml"])
    k8s = gateway["exporters"]["load_balancing"]["resolver"]["k8s"]
    assert k8s["service"] == f"{headless['metadata']['name']}.sextant"
    assert k8s["return_hostnames"] is True  # a restarted pod keeps its place on the ring
    gateway_pod = docs[("StatefulSet", "sextant-gateway")]["spec"]["template"]["spec"]
    account = gateway_pod["serviceAccountName"]
    binding = docs[("RoleBinding", account)]
    assert binding["subjects"][0]["name"] == account
    granted = {
        r for rule in docs[("Role", binding["roleRef"]["name"])]["rules"] for r in rule["resources"]
    }
    assert "endpointslices" in granted
    # ... with the same routing, queue and retry as the compose gateway
    shipped = yaml.safe_load((DEPLOY / "gateway/gateway.yaml").read_text())
    for side in (gateway, shipped):
        del side["exporters"]["load_balancing"]["resolver"]
    assert gateway == shipped
    pod = replicas["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert [t["metadata"]["name"] for t in replicas["spec"]["volumeClaimTemplates"]] == ["data"]
    replica = next(e for e in container["env"] if e["name"] == "SEXTANT_CLUSTER__REPLICA")
    assert replica["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.name"
    # Sextant's config in the ConfigMap is a valid config.
    sextant = yaml.safe_load(docs[("ConfigMap", "sextant-config")]["data"]["sextant.yaml"])
    load_config(None, environ={}, overrides=sextant)
    # so is it with its commented example lines turned on (one `admin:` block, not a second)
    text = docs[("ConfigMap", "sextant-config")]["data"]["sextant.yaml"]
    example = "# allowed_hosts: [sextant.example.com]"
    assert example in text
    turned_on = yaml.safe_load(text.replace(example, example.removeprefix("# ")))
    loaded = load_config(None, environ={}, overrides=turned_on)
    assert loaded.admin.allowed_hosts == ["sextant.example.com"]
    assert loaded.admin.addr == "0.0.0.0:9464"


def test_the_gateway_accepts_both_of_its_configurations(tmp_path: Path):
    """The compose and Kubernetes configurations, as the Collector built from the manifest
    reads them (`validate`: every component and key known to this build)."""
    from tests.support.cluster import gateway_binary

    binary = gateway_binary()
    kubernetes = manifests()[("ConfigMap", "sextant-gateway")]["data"]["gateway.yaml"]
    (tmp_path / "kubernetes.yaml").write_text(kubernetes)
    for config in (DEPLOY / "gateway/gateway.yaml", tmp_path / "kubernetes.yaml"):
        check(binary, "validate", "--config", str(config))
    broken = tmp_path / "broken.yaml"
    broken.write_text(kubernetes.replace("routing_key: attributes", "routing_key: attribute"))
    done = subprocess.run([binary, "validate", "--config", str(broken)], capture_output=True)
    assert done.returncode != 0


def test_the_deploy_alertmanager_routes_each_severity_to_a_receiver_that_gets_it(tmp_path):
    """The real Alertmanager on the deploy config, its receivers' host:port pointed at a real
    `sextant alerts sink`: warning to oncall, critical to the pager, info recorded only."""
    with alert_sink(tmp_path) as sink:
        text = ALERTMANAGER.read_text().replace("http://alert-sink:5001", sink.url)
        assert text.count(sink.url) == 3
        config = tmp_path / "alertmanager.yml"
        config.write_text(text)
        with alertmanager(config, tmp_path) as url:
            ends = (datetime.now(UTC) + timedelta(minutes=5)).isoformat()
            sent = {
                ("SextantQuarantine", "critical"): "/hooks/page",
                ("SextantFail", "warning"): "/hooks/sextant",
                ("SextantReview", "info"): "/hooks/record",
            }
            alerts = [
                {
                    "labels": {"alertname": name, "severity": severity, "service": name},
                    "endsAt": ends,
                }
                for name, severity in sent
            ]
            reply = requests.post(f"{url}/api/v2/alerts", json=alerts, timeout=5)
            assert reply.status_code == 200, reply.text

            def delivered() -> dict[tuple[str, str], str]:
                return {
                    (a["labels"]["alertname"], a["labels"]["severity"]): r["path"]
                    for r in sink.received()
                    for a in r["body"]["alerts"]
                }

            # group_wait is 10 s in the deploy config
            wait_for(lambda: len(delivered()) == len(sent), timeout=40, interval=0.5)
            assert delivered() == sent
        stop(sink.process)
        assert sink.process.returncode == 0  # SIGTERM ends the sink cleanly


def test_the_image_runs_as_a_user_and_its_healthcheck_asks_a_running_collector(tmp_path: Path):
    """No Docker daemon in the tests: the Dockerfile's USER is read, its HEALTHCHECK command is
    run against a real `sextant serve` (on the port the test got) and against nothing."""
    import sys

    from tests.support.process import EPHEMERAL, Serve

    text = (DEPLOY / "Dockerfile").read_text().replace("\\\n", " ")
    lines = [line.split(None, 1) for line in text.splitlines() if line and line[0] != "#"]
    user = [rest.strip() for word, rest in lines if word == "USER"]
    assert user and user[-1].split(":")[0] not in ("root", "0")
    (health,) = [rest for word, rest in lines if word == "HEALTHCHECK"]
    command = json.loads(health[health.index("CMD") + 3 :].strip())
    assert command[0] == "python" and "/healthz" in command[-1], command

    serve = Serve([*EPHEMERAL, "--data-dir", str(tmp_path / "d")], tmp_path)
    probe = [sys.executable, *command[1:-1], command[-1].replace("9464", str(serve.ports["admin"]))]
    try:
        assert subprocess.run(probe, timeout=30).returncode == 0
    finally:
        assert serve.stop() == 0
    assert subprocess.run(probe, capture_output=True, timeout=30).returncode != 0


def grafana_expand(text: str, environ: dict[str, str]) -> str:
    """Grafana's provisioning expansion: $VAR and ${VAR} from the environment, $$ a literal $."""
    return re.sub(
        r"\$\$|\$\{(\w+)\}|\$(\w+)",
        lambda m: "$" if m[0] == "$$" else environ.get(m[1] or m[2], ""),
        text,
    )


def test_exemplar_links_open_the_consoles_trajectory_page():
    compose = yaml.safe_load((DEPLOY / "docker-compose.yml").read_text())
    grafana = compose["services"]["grafana"]
    text = (DEPLOY / "grafana/provisioning/datasources/prometheus.yml").read_text()
    provisioned = yaml.safe_load(grafana_expand(text, grafana["environment"]))
    (destination,) = provisioned["datasources"][0]["jsonData"]["exemplarTraceIdDestinations"]
    assert destination["url"] == "http://localhost:9464/trajectories/${__value.raw}"
    # the browser on the host reaches the console there (published on the host's loopback)
    assert "127.0.0.1:9464:9464" in compose["services"]["sextant-a"]["ports"]
    dashboard = json.loads((DEPLOY / "grafana/dashboards/sextant.json").read_text())
    assert [link["url"] for link in dashboard["links"]] == ["${admin_url}/"]
    described = [p.get("description", "") for p in dashboard["panels"]]
    assert not any("/api/v1/trajectories" in d for d in described)
    assert sum("/trajectories/<trace id>" in d for d in described) == 5
