"""The console in real headless Chromium: what a person opening the admin port sees."""

from __future__ import annotations

import pytest
from playwright.sync_api import Browser

from tests.support.browser import new_page, screenshot
from tests.support.server import RunningServer


@pytest.mark.parametrize("javascript", [True, False])
def test_the_home_page_lists_targets_with_their_decision_reasons_and_runs(
    chromium: Browser, quarantined: RunningServer, javascript: bool
) -> None:
    with new_page(chromium, javascript) as page:
        page.goto(quarantined.admin_url + "/")
        assert page.title() == "Targets · Sextant"
        row = page.locator('#targets tr[data-target^="support-desk/"]')
        assert row.count() == 1
        cells = row.locator("td").all_inner_texts()
        assert cells[:2] == ["support-desk", "support-agent"]
        assert cells[3] == "QUARANTINE"
        assert "approval_boundary_violation" in cells[4]
        assert cells[6] == "2"  # runs in the last hour
        assert cells[7] == "1 / 1 / 0"  # one passed, one failed the approval rule
        if javascript:
            screenshot(page, "targets")
