"""Reading a running server's admin API, waiting until what is asked for is there."""

from __future__ import annotations

import requests
from prometheus_client.parser import text_string_to_metric_families

from tests.support.server import RunningServer
from tests.support.wait import wait_for


def trajectory(server: RunningServer, trace_id: str, revision: int = 1) -> dict:
    """The trajectory of `trace_id` once it has reached `revision`."""

    def fetch():
        reply = requests.get(
            f"{server.admin_url}/api/v1/trajectories/{trace_id}",
            headers=server.auth_headers,
            timeout=5,
        )
        if reply.status_code == 200 and reply.json()["revision"] >= revision:
            return reply.json()
        return None

    return wait_for(fetch, timeout=15)


def decisions(server: RunningServer, **params) -> list[dict]:
    reply = requests.get(
        f"{server.admin_url}/api/v1/decisions",
        params=params,
        headers=server.auth_headers,
        timeout=5,
    )
    reply.raise_for_status()
    return reply.json()["decisions"]


def firing(server: RunningServer, decision: str, **where) -> dict:
    """The first firing `decision` whose fields equal `where`, once there is one."""

    def found():
        for d in decisions(server, state="firing", decision=decision):
            if all(d[k] == v for k, v in where.items()):
                return d
        return None

    return wait_for(found, timeout=15)


def scraped(server: RunningServer, name: str, **labels: str) -> float | None:
    """The sample `name{labels}` as a scrape of `/metrics` shows it (None when absent)."""
    text = requests.get(f"{server.admin_url}/metrics", timeout=5).text
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name == name and s.labels == labels:
                return s.value
    return None
