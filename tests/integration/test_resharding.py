"""A service that moved between replicas is not judged on the part of its window one replica
holds: its window results there are reviews (coverage_resharded), naming the peer that has the
rest; a service that did not move keeps its verdict."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from tests.integration.test_drift import PACK, A
from tests.support.drift import send_alternating, send_runs
from tests.support.server import FAST, serve
from tests.support.wait import wait_for

RUNS = 20


def test_a_window_split_over_two_replicas_is_reviewed(tmp_path: Path) -> None:
    peer = serve(tmp_path / "b", {"canary": PACK}, assembler=FAST)
    here = serve(
        tmp_path / "a",
        {"canary": PACK},
        assembler=FAST,
        drift={"tick_seconds": 0.1},
        # a peer that does not answer cannot say: the others still do
        cluster={"replica": "sextant-a", "peers": [peer.admin_url, "http://127.0.0.1:1"]},
    )
    try:
        send_runs(peer.grpc_endpoint, "travel-desk-moved", "1.4.2", [A] * 3)  # before the move
        for service in ("travel-desk-moved", "travel-desk-stayed"):
            send_alternating(here.grpc_endpoint, service, ("1.4.2", "1.5.1"), (A, A), RUNS)
        wait_for(lambda: here.query("SELECT count(*) FROM trajectories")[0][0] == 4 * RUNS, 60)
        stored = datetime.now(UTC).replace(tzinfo=None)

        def results() -> dict[str, set[tuple[str, str]]] | None:
            rows = here.query_dicts(
                "SELECT service_name, verdict, coalesce(reason, '') AS reason, message FROM results"
                " WHERE scope = 'window' AND evaluated_at = (SELECT min(evaluated_at) FROM results"
                " WHERE scope = 'window' AND evaluated_at > ?)",
                [stored],
            )
            found: dict[str, set[tuple[str, str]]] = {}
            for r in rows:
                found.setdefault(r["service_name"], set()).add((r["verdict"], r["reason"]))
            return found if len(found) == 2 else None

        found = wait_for(results, timeout=30)
        assert found["travel-desk-moved"] == {("review", "coverage_resharded")}
        assert found["travel-desk-stayed"] == {("pass", "")}
        (message,) = {
            r["message"]
            for r in here.query_dicts(
                "SELECT message FROM results WHERE reason = 'coverage_resharded' LIMIT 1"
            )
        }
        assert peer.admin_url.removeprefix("http://") in message and "would be pass" in message
    finally:
        here.stop()
        peer.stop()
