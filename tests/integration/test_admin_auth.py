"""With `auth.tokens` set, every admin route but /metrics, /healthz and /readyz needs the token."""

from __future__ import annotations

import pytest
import requests

from tests.support.admin import firing, trajectory
from tests.support.agents import support_run
from tests.support.cli import sextant
from tests.support.server import RunningServer, serve_deciding

TOKEN = "r3ad-t0ken-0f-the-api"


@pytest.fixture(scope="module")
def guarded(tmp_path_factory) -> tuple[RunningServer, str, str]:
    """A deciding server with a token, one stored run and its firing decision."""
    server = serve_deciding(
        tmp_path_factory.mktemp("auth"),
        auth={"tokens": [TOKEN]},
        admin={"login_burst": 100},  # a wrong token on every route, none of them throttled
    )
    bad = support_run(server, approve=False)
    trajectory(server, bad)
    decision = firing(server, "QUARANTINE")["decision_id"]
    yield server, bad, decision
    server.stop()


def read_paths(trace_id: str, decision_id: str) -> list[str]:
    return [
        "/api/v1/trajectories",
        "/api/v1/trajectories?service=support-desk&limit=5",
        f"/api/v1/trajectories/{trace_id}",
        "/api/v1/decisions",
        f"/api/v1/decisions/{decision_id}",
        "/api/v1/targets",
        "/api/v1/rules",
        "/api/v1/baselines",
        "/api/v1/reliability",
        "/api/v1/sql/limits",
        "/api/v1/review/queue",
    ]


def test_each_read_route_is_401_without_the_token_and_200_with_it(guarded):
    server, trace_id, decision_id = guarded
    for path in read_paths(trace_id, decision_id):
        url = server.admin_url + path
        bare = requests.get(url, timeout=10)
        assert bare.status_code == 401, path
        assert bare.headers["WWW-Authenticate"].startswith("Bearer"), path
        assert "support-desk" not in bare.text and "mira" not in bare.text, path
        wrong = requests.get(url, headers={"Authorization": "Bearer nope"}, timeout=10)
        assert wrong.status_code == 401, path
        assert requests.get(url, headers=server.auth_headers, timeout=10).status_code == 200, path


def test_the_writes_and_unknown_paths_need_the_token_too(guarded):
    server, _, decision_id = guarded
    for path, body in [
        (f"/api/v1/decisions/{decision_id}/ack", {"by": "ana"}),
        ("/api/v1/sql", {"sql": "SELECT user_input FROM trajectories"}),
        ("/api/v1/alerts/test", {}),
        ("/api/v1/baselines", {"name": "b"}),
        ("/api/v1/replay/results", {}),
        ("/api/v1/review/claim", {}),
        ("/api/v1/review/label", {"verdict": "pass"}),
    ]:
        assert requests.post(server.admin_url + path, json=body, timeout=10).status_code == 401
    assert requests.get(server.admin_url + "/api/v1/nothing", timeout=10).status_code == 401
    reply = requests.get(server.admin_url + "/api/v1/nothing", headers=server.auth_headers)
    assert reply.status_code == 404


def test_metrics_and_the_probes_stay_open_by_design(guarded):
    server, _, _ = guarded
    for path in ("/metrics", "/healthz", "/readyz"):
        assert requests.get(server.admin_url + path, timeout=10).status_code == 200, path


def test_the_cli_sends_the_token_from_the_flag_or_the_environment(guarded, capsys, monkeypatch):
    server, trace_id, _ = guarded
    url = ("--url", server.admin_url)
    commands = [
        ("trajectories", "--service", "support-desk"),
        ("show", trace_id),
        ("decisions",),
        ("rules", "status"),
        ("report", "reliability"),
    ]
    monkeypatch.delenv("SEXTANT_TOKEN", raising=False)
    for command in commands:
        code, out = sextant(capsys, *command, *url)
        assert code == 1 and "HTTP 401" in out, command
        code, out = sextant(capsys, *command, *url, "--token", TOKEN)
        assert code == 0, (command, out)
    monkeypatch.setenv("SEXTANT_TOKEN", TOKEN)
    for command in commands:
        code, out = sextant(capsys, *command, *url)
        assert code == 0, (command, out)
