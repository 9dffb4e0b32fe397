"""Decoding on the decode threads behaves exactly like decoding on the event loop, and the
worker processes that build trajectories survive one that dies."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import grpc
import pytest
import requests

from tests.support.otlp import (
    bad_id_request,
    grpc_error,
    grpc_export,
    new_trace_id,
    simple_spans,
    trace_request,
)
from tests.support.server import start_server, stored_spans
from tests.support.wait import wait_for


@pytest.fixture
def pooled(tmp_path: Path):
    server = start_server(
        tmp_path / "data",
        workers={"processes": 1},
        ingest={"inline_decode_bytes": 0},
        # The Python assembly path builds in the worker processes (the native one in threads).
        assembler={"quiet_period_seconds": 0.2, "tick_seconds": 0.05, "native": False},
    )
    yield server
    server.stop()


def test_threaded_decoding_accepts_rejects_and_reports(pooled) -> None:
    trace_id = new_trace_id()
    grpc_export(pooled, trace_request(simple_spans(4, trace_id)).SerializeToString())
    assert stored_spans(pooled, trace_id) == 4

    other = new_trace_id()
    reply = grpc_export(pooled, bad_id_request(other).SerializeToString())
    assert reply.partial_success.rejected_spans == 5
    assert stored_spans(pooled, other) == 3

    error = grpc_error(pooled, b"\x0a\xff\xff garbage")
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
    reply = requests.post(
        f"{pooled.http_url}/v1/traces", data=b"{", headers={"Content-Type": "application/json"}
    )
    assert reply.status_code == 400


def test_a_dead_worker_costs_ingest_nothing_and_a_new_one_builds(pooled) -> None:
    from tests.support.admin import trajectory

    (pid,) = pooled.pipeline.workers.pids()
    os.kill(pid, signal.SIGKILL)
    wait_for(lambda: not os.path.exists(f"/proc/{pid}") or _is_zombie(pid))

    trace_id = new_trace_id()
    grpc_export(pooled, trace_request(simple_spans(3, trace_id)).SerializeToString())
    assert stored_spans(pooled, trace_id) == 3
    assert trajectory(pooled, trace_id.hex())["steps"] == 3


def test_trajectories_are_built_in_the_workers(pooled) -> None:
    from tests.support.admin import trajectory

    trace_id = new_trace_id()
    grpc_export(pooled, trace_request(simple_spans(4, trace_id)).SerializeToString())
    t = trajectory(pooled, trace_id.hex())
    assert (t["steps"], t["status"]) == (4, "ok")


def _is_zombie(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split()[2] == "Z"
    except FileNotFoundError:
        return True
