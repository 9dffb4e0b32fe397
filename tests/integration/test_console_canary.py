"""A canary against its baseline in real Chromium: from the ROLLBACK's page to the target's
page, which names the tool that appeared and the one that vanished with their shares of runs on
each side, gives every metric's value on both sides with its effect size and raw and adjusted
p-values (the numbers the rolled-back look stored), and lists the runs behind each side."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Locator

from collector.console.canary import p_text, side_value
from tests.integration.test_drift import PACK, RUNS, A, B
from tests.support.admin import decisions
from tests.support.browser import new_page, screenshot
from tests.support.drift import send_alternating
from tests.support.server import DECIDE_FAST, FAST, RunningServer, serve
from tests.support.wait import wait_for


@pytest.fixture
def rolled_back(tmp_path: Path) -> Iterator[tuple[RunningServer, dict, list[str], list[str]]]:
    """travel-desk 1.5.0 calls reserve_seat_v2 instead of hold_seat: its canary ROLLBACK, and
    each version's trace ids."""
    server = serve(
        tmp_path,
        {"canary": PACK},
        assembler=FAST,
        drift={"tick_seconds": 0.1},
        decisions=DECIDE_FAST,
    )
    try:
        sent = send_alternating(
            server.grpc_endpoint, "travel-desk", ("1.4.0", "1.5.0"), (A, B), RUNS
        )
        wait_for(
            lambda: server.query("SELECT count(*) FROM trajectories")[0][0] == 2 * RUNS,
            timeout=60,
        )
        decision = wait_for(lambda: rollback(server), timeout=30)
        yield server, decision, *sent
    finally:
        server.stop()


def rollback(server: RunningServer) -> dict | None:
    """The canary version's firing ROLLBACK, once there is one."""
    found = decisions(server, state="firing", decision="ROLLBACK")
    return next((d for d in found if d["service_version"] == "1.5.0"), None)


def latest(server: RunningServer) -> dict[str, dict]:
    """The canary rule's latest look as stored, per metric."""
    rows = server.query_dicts(
        "SELECT * FROM results WHERE scope = 'window' AND service_version = '1.5.0'"
        " QUALIFY evaluated_at = max(evaluated_at) OVER ()"
    )
    return {r["metric"]: {**r, "details": json.loads(r["details"])} for r in rows}


def cells(row: Locator) -> dict[str, str]:
    return {
        name: row.locator(f"td.{name}").inner_text().strip()
        for name in ("baseline", "current", "p-raw", "p-adjusted")
    }


def trace_ids(page_rows: Locator) -> set[str]:
    return {r.get_attribute("data-trace") or "" for r in page_rows.all()}


def test_the_rollbacks_canary_names_the_tools_that_moved_and_every_metric_on_both_sides(
    chromium: Browser, rolled_back: tuple[RunningServer, dict, list[str], list[str]]
) -> None:
    server, decision, baseline_runs, canary_runs = rolled_back
    with new_page(chromium) as page:
        page.goto(f"{server.admin_url}/decisions/{decision['decision_id']}")
        page.click("#facts a#canary")
        assert page.url.startswith(f"{server.admin_url}/target?service=travel-desk")
        assert page.url.endswith("&version=1.5.0#canary")
        look = page.locator('section.look[data-rule="travel-canary/canary-tool-mix"]')
        assert look.locator("h3 .verdict").inner_text() == "fail"
        screenshot(page, "canary", look)
        # when it looked and its window, printed as every page prints a time
        assert re.fullmatch(
            r"\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2} UTC", look.locator("time").first.inner_text()
        )
        assert look.locator("dl.facts time[datetime]").count() == 3

        # the tools: one appeared, one vanished, their shares of each side's runs
        tools = look.locator("table.tools tbody tr")
        assert [t.get_attribute("data-tool") for t in tools.all()[:2]] == [
            "hold_seat",
            "reserve_seat_v2",
        ]
        new = look.locator('table.tools tr[data-tool="reserve_seat_v2"]')
        assert new.get_attribute("data-change") == "appeared"
        gone = look.locator('table.tools tr[data-tool="hold_seat"]')
        assert gone.get_attribute("data-change") == "vanished"
        same = look.locator('table.tools tr[data-tool="search_flights"]')
        assert same.get_attribute("data-change") == "unchanged"
        stored = latest(server)
        by_tool = {t["tool"]: t for t in stored["tool_choice"]["details"]["tools"]}
        for row, tool, shares in (
            (new, "reserve_seat_v2", ("0.0 %", "100.0 %")),
            (gone, "hold_seat", ("100.0 %", "0.0 %")),
            (same, "search_flights", ("100.0 %", "100.0 %")),
        ):
            shown = cells(row)
            assert (shown["baseline"], shown["current"]) == shares
            assert shown["p-raw"] == p_text(by_tool[tool]["p_raw"])
            assert shown["p-adjusted"] == p_text(by_tool[tool]["p_adjusted"])
        # the new tool is what failed the mix: significant after the correction too
        assert by_tool["reserve_seat_v2"]["p_adjusted"] < 0.01

        # every metric: both sides' values, the effect size, raw and adjusted p
        for metric in ("tool_choice", "steps", "error_rate"):
            row = look.locator(f'table.metrics tr[data-metric="{metric}"]')
            result = stored[metric]
            shown = cells(row)
            assert row.locator("td.effect").inner_text() == f"{result['effect_size']:.3f}"
            assert shown["p-raw"] == p_text(result["details"]["p_raw"])
            assert shown["p-adjusted"] == p_text(result["p_value"])
            assert row.locator(".verdict").inner_text() == result["verdict"]
        tool_row = cells(look.locator('table.metrics tr[data-metric="tool_choice"]'))
        assert float(tool_row["p-adjusted"]) < 0.01
        assert float(tool_row["p-raw"]) <= float(tool_row["p-adjusted"])
        steps = cells(look.locator('table.metrics tr[data-metric="steps"]'))
        details = stored["steps"]["details"]
        assert steps["baseline"] == side_value(details["baseline"], "steps")
        assert steps["current"] == side_value(details["current"], "steps")
        assert steps["baseline"].startswith("p50 ") and " · p95 " in steps["baseline"]
        errors = cells(look.locator('table.metrics tr[data-metric="error_rate"]'))
        assert (errors["baseline"], errors["current"]) == ("0.0 %", "0.0 %")

        # the runs behind each side: the trajectory list filtered to that version and window
        look.locator("a.runs-canary").click()
        page.wait_for_url("**/trajectories?*")
        listed = page.locator("#trajectories tbody tr")
        listed.first.wait_for()
        assert trace_ids(listed) == set(canary_runs)
        assert {t.inner_text() for t in page.locator("#trajectories td.target").all()} == {
            "travel-desk/travel-agent/1.5.0"
        }
        page.go_back()
        page.wait_for_url("**/target?*")
        page.locator("section.look a.runs-baseline", has_text="runs of 1.4.0").click()
        page.wait_for_url("**/trajectories?*")
        page.locator("#trajectories tbody tr").first.wait_for()
        shown_runs = trace_ids(page.locator("#trajectories tbody tr"))
        assert shown_runs <= set(baseline_runs) and len(shown_runs) >= RUNS - 1


def test_a_target_no_canary_rule_judged_says_so(
    chromium: Browser, rolled_back: tuple[RunningServer, dict, list[str], list[str]]
) -> None:
    server = rolled_back[0]
    with new_page(chromium, javascript=False) as page:
        page.goto(f"{server.admin_url}/")
        page.click('#targets tr[data-target="travel-desk/travel-agent@1.4.0"] a[href^="/target?"]')
        assert page.locator("#no-canary").is_visible()
        page.goto(f"{server.admin_url}/")
        page.click('#targets tr[data-target="travel-desk/travel-agent@1.5.0"] a[href^="/target?"]')
        assert page.locator("section.look table.tools").is_visible()
