"""The trajectory pages in real headless Chromium: the list a person filters and pages through,
and one run's page with the failed rule on the step that broke it."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from playwright.sync_api import Browser, Page

from tests.support.admin import trajectory
from tests.support.agents import support_run
from tests.support.browser import new_page, screenshot
from tests.support.server import RunningServer, serve_shipped_packs

REASON = "approval_boundary_violation"


@dataclass
class Runs:
    server: RunningServer
    good: str
    violating: list[str]


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Runs]:
    """One support-desk run that asked for approval and two that changed the account without."""
    server = serve_shipped_packs(tmp_path_factory.mktemp("console-trajectories"))
    try:
        good = support_run(server, approve=True)
        violating = [support_run(server, approve=False, user=u) for u in ("mira", "noor")]
        for trace_id in (good, *violating):
            trajectory(server, trace_id)
        yield Runs(server, good, violating)
    finally:
        server.stop()


def listed(page: Page) -> list[str]:
    return page.locator("#trajectories tbody tr").evaluate_all(
        "rows => rows.map(r => r.dataset.trace)"
    )


@pytest.mark.parametrize("javascript", [True, False])
def test_filtering_the_list_by_reason_finds_exactly_the_violating_runs(
    chromium: Browser, runs: Runs, javascript: bool
) -> None:
    with new_page(chromium, javascript) as page:
        page.goto(runs.server.admin_url + "/trajectories")
        assert page.title() == "Trajectories · Sextant"
        assert sorted(listed(page)) == sorted([runs.good, *runs.violating])
        page.fill('#filters input[name="reason"]', REASON)
        page.click('#filters button[type="submit"]')
        page.wait_for_url(f"**reason={REASON}**")
        assert sorted(listed(page)) == sorted(runs.violating)
        for row in page.locator("#trajectories tbody tr").all():
            assert row.locator(".verdict").inner_text() == "fail"
            assert REASON in row.locator(".reasons").inner_text()
        assert page.locator('#filters input[name="reason"]').input_value() == REASON
        page.select_option('#filters select[name="verdict"]', "pass")
        page.fill('#filters input[name="reason"]', "")
        page.click('#filters button[type="submit"]')
        page.wait_for_url("**verdict=pass**")
        assert listed(page) == [runs.good]
        if javascript:
            page.goto(runs.server.admin_url + "/trajectories")
            screenshot(page, "trajectories")


@pytest.mark.parametrize("sort", ["time", "duration"])
def test_the_next_page_link_carries_on_where_the_page_ended(
    chromium: Browser, runs: Runs, sort: str
) -> None:
    with new_page(chromium, javascript=False) as page:
        page.goto(f"{runs.server.admin_url}/trajectories?limit=2&sort={sort}")
        first = listed(page)
        assert len(first) == 2
        page.click("#next-page")
        second = listed(page)
        assert len(second) == 1
        assert page.locator("#next-page").count() == 0
        assert sorted(first + second) == sorted([runs.good, *runs.violating])
        assert page.locator('#filters select[name="sort"]').input_value() == sort


def test_a_bad_filter_says_what_is_wrong(chromium: Browser, runs: Runs) -> None:
    with new_page(chromium, javascript=False) as page:
        reply = page.goto(runs.server.admin_url + "/trajectories?since=yesterday-ish")
        assert reply is not None and reply.status == 400
        assert "yesterday-ish" in page.locator(".error").inner_text()


@pytest.mark.parametrize("javascript", [True, False])
def test_the_violating_run_shows_the_failed_approval_rule_on_the_update_account_step(
    chromium: Browser, runs: Runs, javascript: bool
) -> None:
    with new_page(chromium, javascript) as page:
        page.goto(runs.server.admin_url + "/trajectories?reason=" + REASON)
        page.click(f'#trajectories tr[data-trace="{runs.violating[0]}"] td.request a')
        page.wait_for_url(f"**/trajectories/{runs.violating[0]}")
        assert page.locator("#trace-id").inner_text() == runs.violating[0]
        step = page.locator('#steps tr[data-name="update_account"]')
        assert step.count() == 1
        assert step.locator(".kind").inner_text() == "tool"
        badge = step.locator(".badge-line")
        assert badge.locator(".badge").inner_text() == "fail"
        assert badge.locator(".reason").inner_text() == REASON
        # no other step carries it, and the run's other steps are visibly of their kinds
        assert page.locator("#steps .badge-line").count() == badge.count()
        kinds = set(page.locator("#steps .kind").all_inner_texts())
        assert {"agent", "llm", "tool"} <= kinds
        assert page.locator('#steps tr[data-name="request_approval"]').count() == 0
        # the arguments are there, folded away until opened
        arguments = step.locator("details.payload pre").first
        assert not arguments.is_visible()
        step.locator("details.payload summary").first.click()
        assert '"customer_id": "C-1"' in arguments.inner_text()
        # the results that passed are listed too, and the failed one points at its step
        seq = step.get_attribute("data-seq")
        failed = page.locator("#results tr", has=page.locator(f'a[href="#step-{seq}"]'))
        assert failed.locator(".badge").inner_text() == "fail"
        assert "pass" in page.locator("#results .badge").all_inner_texts()
        assert page.locator("#totals").inner_text().count("steps") == 1
        assert f"--trace-id {runs.violating[0]}" in page.locator(".commands").inner_text()
        assert not page.locator("#spans table").is_visible()
        page.click("#spans summary")
        assert page.locator("#spans tbody tr").count() >= 5
        if javascript:
            screenshot(page, "trajectory")


def test_the_good_run_has_no_failed_step(chromium: Browser, runs: Runs) -> None:
    with new_page(chromium, javascript=False) as page:
        page.goto(f"{runs.server.admin_url}/trajectories/{runs.good}")
        assert page.locator('#steps tr[data-name="request_approval"] .kind').inner_text() == (
            "approval"
        )
        assert page.locator("#steps .badge-line").count() == 0
        assert page.locator("h1 .verdict").inner_text() == "pass"
        missing = page.goto(f"{runs.server.admin_url}/trajectories/{'0' * 32}")
        assert missing is not None and missing.status == 404


@pytest.mark.parametrize(
    "rule", ["approval-before-account-change", "support-agent/approval-before-account-change"]
)
def test_filtering_by_a_rule_finds_the_runs_it_objected_to(
    chromium: Browser, runs: Runs, rule: str
) -> None:
    with new_page(chromium, javascript=False) as page:
        page.goto(f"{runs.server.admin_url}/trajectories?rule={rule}")
        assert sorted(listed(page)) == sorted(runs.violating)
        page.goto(f"{runs.server.admin_url}/trajectories?rule=default/{rule.split('/')[-1]}")
        assert listed(page) == []
