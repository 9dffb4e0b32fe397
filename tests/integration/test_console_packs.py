"""The console's rule packs and SQL pages in real headless Chromium."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

import pytest
import requests
from playwright.sync_api import Browser, Page

from collector.store.views import VIEWS
from tests.support.admin import trajectory
from tests.support.agents import support_run
from tests.support.browser import new_page, screenshot
from tests.support.server import SHIPPED_PACKS, RunningServer, serve_deciding
from tests.support.wait import wait_for


def cells(page: Page, selector: str) -> list[str]:
    return [text.strip() for text in page.locator(selector).locator("td").all_inner_texts()]


def test_the_packs_page_lists_the_shipped_packs_and_each_rules_counts(
    chromium: Browser, quarantined: RunningServer
) -> None:
    with new_page(chromium, javascript=False) as page:
        page.goto(quarantined.admin_url + "/packs")
        assert page.title() == "Rule packs · Sextant"
        shipped = sorted(SHIPPED_PACKS.glob("*.yaml"))
        assert page.locator("#packs tbody tr").count() == len(shipped)
        for path in shipped:
            text = path.read_text()
            name = re.search(r"^name: (\S+)", text, re.M)
            version = re.search(r'^version: "(.+)"', text, re.M)
            assert name and version
            row = cells(page, f'#packs tr[data-pack="{name[1]}"]')
            assert row[0] == name[1]
            assert row[1] == version[1]
            assert row[3].endswith(path.name)
            assert row[4] == hashlib.sha256(text.encode()).hexdigest()[:12]
            assert int(row[5]) == text.count("\n  - id: ")
        support = cells(page, '#packs tr[data-pack="support-agent"]')
        assert support[2] == "support-platform-oncall"
        assert "precedes" in support[6].split()
        # One approved run passed the approval rule, the one that skipped approval failed it.
        rule = cells(
            page,
            'section[data-pack="support-agent"] tr[data-rule="approval-before-account-change"]',
        )
        assert rule[1:5] == ["precedes", "active", "2", "1"]
        assert rule[5] == "1"  # failed
        assert page.locator(".refusal").count() == 0
        screenshot(page, "packs")


def test_a_refused_edit_shows_its_file_line_error_and_the_last_good_version_stays(
    chromium: Browser, tmp_path: Path
) -> None:
    server = serve_deciding(tmp_path)
    try:
        pack = server.rules_dir / "support-agent.yaml"
        good = hashlib.sha256(pack.read_bytes()).hexdigest()[:12]
        broken = pack.read_text().replace("type: precedes", "type: preceeds", 1)
        pack.write_text(broken.replace('version: "1.0.0"', 'version: "1.1.0"', 1))
        # The loader names the rule's line: where its `- id:` starts.
        line = broken.splitlines().index("  - id: approval-before-account-change") + 1
        with new_page(chromium, javascript=False) as page:

            def refused() -> bool:
                page.goto(server.admin_url + "/packs")
                return page.locator('section[data-pack="support-agent"] .refusal').count() == 1

            wait_for(refused, timeout=10, interval=0.2)
            error = page.locator(
                'section[data-pack="support-agent"] .refusal li'
            ).first.inner_text()
            where = (
                rf"/support-agent\.yaml:{line}: rules\[0\]\(id=approval-before-account-change\): "
            )
            assert re.search(where + "unknown rule type; known types: .*precedes", error), error
            assert "version 1.0.0 stays in force" in page.locator(".refusal").inner_text()
            row = cells(page, '#packs tr[data-pack="support-agent"]')
            assert row[1] == "1.0.0" and row[4] == good  # the last good version, not the edit
            assert "1 with a refused edit" in page.locator("#pack-count").inner_text()
    finally:
        server.stop()


def run_query(page: Page, sql: str, max_rows: int | None = None) -> None:
    page.fill("#sql", sql)
    if max_rows is not None:
        page.fill('input[name="max_rows"]', str(max_rows))
    page.click('button[value="table"]')
    # The answer to this query, not the previous one still on the page.
    page.wait_for_function("sql => document.getElementById('answer').dataset.sql === sql", arg=sql)


@pytest.mark.parametrize("javascript", [True, False])
def test_the_sql_page_runs_a_query_truncates_and_refuses_like_the_endpoint(
    chromium: Browser, quarantined: RunningServer, javascript: bool
) -> None:
    count = quarantined.query("SELECT count(*) FROM trajectories")[0][0]
    assert count >= 2
    with new_page(chromium, javascript) as page:
        page.goto(quarantined.admin_url + "/sql")
        assert page.title() == "SQL · Sextant"
        if javascript:
            page.evaluate("window.notReloaded = true")
        run_query(page, "SELECT count(*) AS n FROM trajectories")
        assert page.locator("#rows th").all_inner_texts() == ["n"]
        assert page.locator("#rows tbody td").all_inner_texts() == [str(count)]
        assert page.url.endswith("/sql")
        if javascript:
            assert page.evaluate("window.notReloaded") is True  # answered in place
            screenshot(page, "sql")

        run_query(page, "SELECT range AS i FROM range(10)", max_rows=3)
        assert page.locator("#rows tbody tr").count() == 3
        assert page.locator(".truncated").get_attribute("data-truncated-by") == "max_rows"

        hostile = "SELECT * FROM checkpoint()"
        run_query(page, hostile)
        api = requests.post(
            quarantined.admin_url + "/api/v1/sql", json={"sql": hostile}, timeout=10
        )
        assert api.status_code == 400
        refusal = page.locator("#answer .refusal").inner_text()
        assert api.json()["error"] in refusal and "checkpoint" in refusal
        assert page.locator("#rows").count() == 0
        assert page.input_value("#sql") == hostile  # kept for editing
    assert quarantined.query("SELECT count(*) FROM trajectories")[0][0] == count


def test_the_sql_page_downloads_csv_and_lists_the_views(
    chromium: Browser, quarantined: RunningServer, tmp_path: Path
) -> None:
    count = quarantined.query("SELECT count(*) FROM trajectories")[0][0]
    with new_page(chromium, javascript=True) as page:
        page.goto(quarantined.admin_url + "/sql")
        page.fill("#sql", "SELECT count(*) AS n, 'a,b' AS quoted FROM trajectories")
        with page.expect_download() as download:
            page.click('button[value="csv"]')
        saved = tmp_path / "answer.csv"
        download.value.save_as(saved)
        assert download.value.suggested_filename == "sextant-query.csv"
        assert saved.read_text() == f'n,quoted\n{count},"a,b"\n'

        run_query(page, "SELECT '<b>not bold</b>' AS \"<i>x</i>\"")
        assert page.locator("#rows th").all_inner_texts() == ["<i>x</i>"]
        assert page.locator("#rows tbody td").all_inner_texts() == ["<b>not bold</b>"]
        assert page.locator("#rows b, #rows i").count() == 0  # data is text, never markup

        assert page.locator("#views dt").all_inner_texts() == list(VIEWS)
        tool_calls = page.locator("#views dt:has-text('tool_calls') + dd").inner_text()
        assert "tool_name" in tool_calls and "arguments" in tool_calls


def test_the_rule_counts_say_they_restart_at_zero_with_the_collector(
    chromium: Browser, tmp_path: Path
) -> None:
    rule = 'section[data-pack="support-agent"] tr[data-rule="approval-before-account-change"]'

    def counted_since(page: Page) -> str:
        note = page.locator("#counted-since")
        assert "since the last start at" in note.inner_text()
        assert "restart at 0" in note.inner_text()
        return note.locator("time").get_attribute("datetime") or ""

    server = serve_deciding(tmp_path)
    try:
        trajectory(server, support_run(server, approve=False))
        with new_page(chromium, javascript=False) as page:
            page.goto(server.admin_url + "/packs")
            first_start = counted_since(page)
            assert cells(page, rule)[3] == "1"  # evaluated
    finally:
        server.stop()
    server = serve_deciding(tmp_path)  # the same store and packs, a new process
    try:
        with new_page(chromium, javascript=False) as page:
            page.goto(server.admin_url + "/packs")
            assert counted_since(page) >= first_start
            assert cells(page, rule)[3] == "0"
            page.goto(server.admin_url + "/trajectories")  # what was stored stays
            assert page.locator("#trajectories tbody tr").count() == 1
    finally:
        server.stop()
