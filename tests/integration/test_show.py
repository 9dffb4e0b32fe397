"""`sextant show` prints a stored trajectory as a tree, from the API or from a DuckDB file."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import requests
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter

from tests.support.admin import trajectory
from tests.support.agents import booking_run, provider_for
from tests.support.server import FAST, start_server


def show(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "collector.cli", "show", *args],
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_show_from_the_api_and_from_a_file(tmp_path: Path) -> None:
    server = start_server(tmp_path / "data", assembler=FAST)
    try:
        provider = provider_for(OTLPSpanExporter(endpoint=server.grpc_endpoint, insecure=True))
        trace_id = booking_run(provider)
        provider.shutdown()
        trajectory(server, trace_id)
        result = show(trace_id, "--url", server.admin_url)
        assert result.returncode == 0, result.stderr
        lines = result.stdout.splitlines()
        assert lines[0].startswith(f"trace {trace_id}  revision 1")
        assert "travel-desk / travel-agent / 2.3.1" in lines[1]
        assert "6 steps, 2 tool calls, 3 LLM calls, 1500→60 tokens" in result.stdout
        tree = [line for line in lines if " ms" in line and not line.startswith("totals")]
        assert tree[0].startswith("agent    travel-agent")
        assert tree[2].startswith("  tool     search_flights")
        assert '{"origin":"LIS","destination":"OSL"}' in tree[2]
        assert "400→20 tok" in tree[1]

        as_json = json.loads(show(trace_id, "--url", server.admin_url, "--json").stdout)
        assert as_json["trace_id"] == trace_id and len(as_json["steps_detail"]) == 6

        latest = show("--latest", "--url", server.admin_url)
        assert latest.stdout == result.stdout

        listed = requests.get(f"{server.admin_url}/api/v1/trajectories?limit=5&agent=travel-agent")
        (summary,) = listed.json()["trajectories"]
        assert (summary["trace_id"], summary["steps"], summary["status"]) == (trace_id, 6, "ok")
        none = requests.get(f"{server.admin_url}/api/v1/trajectories?service=nope").json()
        assert none == {"trajectories": []}
        bad = requests.get(f"{server.admin_url}/api/v1/trajectories?colour=red")
        assert bad.status_code == 400 and "unknown parameter 'colour'" in bad.json()["error"]
        assert requests.get(f"{server.admin_url}/api/v1/trajectories?limit=0").status_code == 400
        recent = requests.get(f"{server.admin_url}/api/v1/trajectories?since=1h&agent=travel-agent")
        assert [t["trace_id"] for t in recent.json()["trajectories"]] == [trace_id]
        future = requests.get(f"{server.admin_url}/api/v1/trajectories?since=2999-01-01T00:00")
        assert future.json() == {"trajectories": []}
        vague = requests.get(f"{server.admin_url}/api/v1/trajectories?since=yesterday")
        assert vague.status_code == 400 and "yesterday" in vague.json()["error"]

        missing = show("ab" * 16, "--url", server.admin_url)
        assert missing.returncode == 1 and "no trajectory" in missing.stderr
    finally:
        server.stop()
    from_file = show(trace_id, "--db", str(tmp_path / "data" / "sextant.duckdb"))
    assert from_file.returncode == 0, from_file.stderr
    assert from_file.stdout == result.stdout
    latest_file = show("--latest", "--db", str(tmp_path / "data" / "sextant.duckdb"))
    assert latest_file.stdout == result.stdout
    down = show(trace_id, "--url", "http://127.0.0.1:1")
    assert down.returncode == 3 and "cannot reach" in down.stderr  # exit 3: unreachable
