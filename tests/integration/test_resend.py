"""Re-send: an incident's stored spans replayed as OTLP into a second Sextant arrive identical."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.support.admin import trajectory
from tests.support.agents import refund_run
from tests.support.cli import sextant, sextant_streams
from tests.support.server import FAST, start_server
from tests.support.wait import wait_for

# Everything the agent sent; received_at is when each collector got it.
COMPARED = "* EXCLUDE (received_at)"


@pytest.mark.parametrize("protocol", ["grpc", "http/protobuf"])
def test_spans_arrive_identical(tmp_path: Path, protocol: str, capsys) -> None:
    first = start_server(tmp_path / "first", assembler=FAST)
    second = start_server(tmp_path / "second", assembler=FAST)
    try:
        incident = refund_run(first, approve=False)
        other = refund_run(first, approve=True)
        trajectory(first, incident)
        trajectory(first, other)
        endpoint = second.grpc_endpoint if protocol == "grpc" else second.http_url
        code, printed, _ = sextant_streams(
            capsys,
            "replay",
            "--url",
            first.admin_url,
            "--trace-id",
            incident,
            "--to-otlp",
            endpoint,
            "--protocol",
            protocol,
        )
        assert code == 0
        sql = f"SELECT {COMPARED} FROM spans WHERE trace_id = ? ORDER BY span_id"
        original = first.query(sql, [incident])
        assert f"sent {len(original)} spans of 1 traces" in printed
        wait_for(lambda: len(second.query(sql, [incident])) == len(original))
        assert second.query(sql, [incident]) == original
        assert second.query("SELECT DISTINCT trace_id FROM spans") == [(incident,)]
        # The second Sextant rebuilds the same trajectory from them.
        assert trajectory(second, incident)["steps"] == trajectory(first, incident)["steps"]
    finally:
        second.stop()
        first.stop()


def test_shift_to_now_moves_every_span_by_the_same_amount(tmp_path: Path, capsys) -> None:
    first = start_server(tmp_path / "first", assembler=FAST)
    second = start_server(tmp_path / "second", assembler=FAST)
    try:
        incident = refund_run(first, approve=False)
        trajectory(first, incident)
        time.sleep(0.2)  # let the wall clock move past the original spans
        args = ["--url", first.admin_url, "--trace-id", incident, "--shift-to-now"]
        sextant(capsys, "replay", *args, "--to-otlp", second.grpc_endpoint)
        sql = "SELECT span_id, start_time_unix_nano, end_time_unix_nano FROM spans ORDER BY 1"
        before = first.query(sql)
        after = wait_for(lambda: (rows := second.query(sql)) and len(rows) == len(before) and rows)
        shifts = {a[1] - b[1] for a, b in zip(after, before, strict=True)}
        shifts |= {a[2] - b[2] for a, b in zip(after, before, strict=True)}
        assert len(shifts) == 1 and shifts.pop() >= 200_000_000
    finally:
        second.stop()
        first.stop()
