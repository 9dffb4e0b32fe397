"""Datasets and recertification on a real collector fed by a real OTLP exporter: a QUARANTINE's
evidence becomes a dataset that fails under the pack that fired it and passes under the fixed
one, and the decision can be resolved by hand only then; runs are added to datasets from the
console's pages (forms with their CSRF token), the API and the command line."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import orjson
import pytest
import requests
from playwright.sync_api import Browser

from tests.support.admin import decisions, firing, trajectory
from tests.support.agents import refund_run
from tests.support.browser import new_page
from tests.support.cli import sextant
from tests.support.paths import TESTDATA
from tests.support.server import DECIDE_FAST, FAST, RunningServer, serve
from tests.support.wait import wait_for

REPLAY = TESTDATA / "replay"
V2, V3 = REPLAY / "refunds-v2.yaml", REPLAY / "refunds-v3.yaml"
# Decisions that stay firing while the test works (their failure is in the window), and a
# QUARANTINE or ROLLBACK resolved by hand only after a clean recertification.
RECERTIFYING = {
    **DECIDE_FAST,
    "resolve_after_seconds": 300,
    "recertify": ["QUARANTINE", "ROLLBACK"],
}


@pytest.fixture
def quarantined(tmp_path: Path) -> Iterator[tuple[RunningServer, dict, str, str]]:
    """Refunds under pack v2: an approved refund passes, an unapproved one QUARANTINEs."""
    server = serve(
        tmp_path,
        {"refunds": V2},
        assembler=FAST,
        rules={"reload_seconds": 0.1},
        decisions=RECERTIFYING,
    )
    try:
        good = refund_run(server, approve=True)
        bad = refund_run(server, approve=False)
        assert trajectory(server, good)["verdict"] == "pass"
        assert trajectory(server, bad)["verdict"] == "fail"
        yield server, firing(server, "QUARANTINE", service_name="support-desk"), bad, good
    finally:
        server.stop()


def history(server: RunningServer, decision_id: str) -> list[dict]:
    reply = requests.get(f"{server.admin_url}/api/v1/decisions/{decision_id}", timeout=5)
    reply.raise_for_status()
    return reply.json()["history"]


def load_pack(server: RunningServer, pack: Path, version: str) -> None:
    """Replace the refunds pack in force and wait until the collector evaluates that version."""
    assert server.rules_dir is not None
    (server.rules_dir / "refunds.yaml").write_text(pack.read_text())

    def loaded() -> bool:
        packs = requests.get(f"{server.admin_url}/api/v1/rules", timeout=5).json()["packs"]
        return any(p["pack"] == "refunds" and p["version"] == version for p in packs)

    wait_for(loaded)


def test_a_quarantine_resolves_only_once_its_evidence_passes_under_the_fixed_pack(
    quarantined: tuple[RunningServer, dict, str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    server, d, bad, _ = quarantined
    decision_id, url = d["decision_id"], server.admin_url
    assert d["evidence_trace_ids"] == [bad]

    # Under the pack that fired it, the resolve is refused, naming the run that still fails.
    code, out = sextant(
        capsys, "decisions", "resolve", decision_id, "--by", "ana", "--note", "x", "--url", url
    )
    assert code == 1, out
    assert "HTTP 409" in out
    assert f"dataset {decision_id} under refunds@2: 0 of 1 cases as expected" in out
    assert f"{bad}: refunds: verdict fail, expected pass" in out
    assert [x["decision_id"] for x in decisions(server, state="firing")] == [decision_id]

    # The evidence became a dataset named after the decision, each run expected to PASS.
    code, out = sextant(capsys, "dataset", "show", decision_id, "--url", url)
    assert code == 0, out
    assert bad in out and "pass" in out
    # It fails under the old pack and passes under the fixed one, as cases and as a replay.
    code, out = sextant(capsys, "rules", "test", str(V2), "--dataset", decision_id, "--url", url)
    assert code == 1 and "0 of 1 cases as expected" in out, out
    code, out = sextant(capsys, "rules", "test", str(V3), "--dataset", decision_id, "--url", url)
    assert code == 0 and "1 of 1 cases as expected" in out, out
    code, out = sextant(capsys, "replay", "--dataset", decision_id, "--rules", str(V2),
                        "--url", url, "--jobs", "1")  # fmt: skip
    assert code == 1 and f"dataset {decision_id}: 0 of 1 cases as expected" in out, out
    code, out = sextant(capsys, "replay", "--dataset", decision_id, "--rules", str(V3),
                        "--url", url, "--jobs", "1")  # fmt: skip
    assert code == 0 and f"ok   {decision_id} {bad}: refunds pass" in out, out

    # With the fixed pack in force the resolve goes through.
    load_pack(server, V3, "3")
    done = requests.post(
        f"{url}/api/v1/decisions/{decision_id}/resolve",
        json={"by": "ana", "note": "small refunds need no approval"},
        timeout=30,
    )
    assert done.status_code == 200, done.text
    assert done.json()["state"] == "resolved"
    assert decisions(server, state="firing") == []

    steps = history(server, decision_id)
    assert [(h["event"], h["state"], h["actor"]) for h in steps] == [
        ("firing", "firing", "sextant"),
        ("recertify", "firing", "ana"),
        ("recertify", "firing", "ana"),
        ("resolve", "resolved", "ana"),
    ]
    refused, passed = (orjson.loads(h["recertification"]) for h in steps[1:3])
    assert (refused["dataset"], refused["packs"], refused["result"]) == (
        decision_id,
        ["refunds@2"],
        "fail",
    )
    assert [f["trace_id"] for f in refused["failing"]] == [bad]
    assert (passed["dataset"], passed["packs"], passed["result"]) == (
        decision_id,
        ["refunds@3"],
        "pass",
    )
    assert passed["cases"] == 1 and passed["failing"] == []
    assert steps[2]["note"] == (
        f"recertification passed: dataset {decision_id} under refunds@3: 1 of 1 cases as expected"
    )
    assert steps[3]["note"] == "small refunds need no approval"


def test_runs_are_added_from_the_api_and_the_command_line_with_clear_refusals(
    quarantined: tuple[RunningServer, dict, str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    server, d, bad, good = quarantined
    url = server.admin_url
    code, out = sextant(capsys, "dataset", "add", "refunds", good, "--expect", "pass",
                        "--by", "ana", "--url", url)  # fmt: skip
    assert code == 0 and "added 1 runs to dataset refunds (expect pass)" in out, out
    added = requests.post(
        f"{url}/api/v1/datasets/refunds/cases",
        json={"decision": d["decision_id"], "expect": "fail", "by": "bo"},
        timeout=10,
    )
    assert (added.status_code, added.json()["added"]) == (201, [bad])
    cases = requests.get(f"{url}/api/v1/datasets/refunds", timeout=5).json()["cases"]
    assert [(c["trace_id"], c["expect"], c["added_by"]) for c in cases] == [
        (good, "pass", "ana"),
        (bad, "fail", "bo"),
    ]
    listed = requests.get(f"{url}/api/v1/datasets", timeout=5).json()["datasets"]
    assert [(x["dataset"], x["cases"]) for x in listed] == [("refunds", 2)]
    code, out = sextant(capsys, "dataset", "list", "--url", url)
    assert code == 0 and "refunds" in out, out
    # the fixed pack passes the approved run and, now, the small unapproved refund too
    code, out = sextant(capsys, "rules", "test", str(V3), "--dataset", "refunds", "--url", url)
    assert code == 1 and f"FAIL refunds ({bad}): verdict pass, expected fail" in out, out

    refusals = [
        ({"trace_ids": [good]}, 400, 'say who adds the runs: "by": "NAME"'),
        ({"by": "ana"}, 400, 'give "trace_ids" (a list) or "decision" (an id), one of them'),
        ({"by": "ana", "trace_ids": [good], "expect": "maybe"}, 400, "expect 'maybe': use pass"),
        ({"by": "ana", "trace_ids": ["0" * 32]}, 400, f"no trajectory for trace {'0' * 32}"),
        ({"by": "ana", "decision": "d-none"}, 400, "no decision 'd-none'"),
        ({"by": "ana", "trace_ids": [good], "owner": "x"}, 400, "unknown field 'owner'"),
    ]
    for body, status, message in refusals:
        reply = requests.post(f"{url}/api/v1/datasets/refunds/cases", json=body, timeout=5)
        assert (reply.status_code, message in reply.json()["error"]) == (status, True), reply.text
    bad_name = requests.post(
        f"{url}/api/v1/datasets/{quote('a b')}/cases", json={"by": "a", "trace_ids": [good]}
    )
    assert bad_name.status_code == 400 and "dataset name 'a b'" in bad_name.json()["error"]
    assert requests.get(f"{url}/api/v1/datasets/absent", timeout=5).status_code == 404


def test_the_console_adds_a_run_and_a_decisions_evidence_and_refuses_an_unclean_resolve(
    chromium: Browser, quarantined: tuple[RunningServer, dict, str, str]
) -> None:
    server, d, bad, good = quarantined
    decision_id = d["decision_id"]
    with new_page(chromium, javascript=False) as page:
        page.goto(f"{server.admin_url}/trajectories/{good}")
        page.fill('#add-dataset input[name="name"]', "refunds-smoke")
        page.select_option('#add-dataset select[name="expect"]', "pass")
        page.fill('#add-dataset input[name="by"]', "ana")
        page.click('#add-dataset button[type="submit"]')
        assert page.url == f"{server.admin_url}/datasets/refunds-smoke"
        row = page.locator(f'#cases tr[data-trace="{good}"]')
        assert row.locator(".expect").inner_text() == "pass"
        assert row.locator(".actor").inner_text() == "ana"

        page.goto(f"{server.admin_url}/decisions/{decision_id}")
        assert page.locator("#recertify-needed").count() == 1
        page.fill('#add-dataset input[name="name"]', "refunds-smoke")
        page.fill('#add-dataset input[name="by"]', "bo")
        page.click('#add-dataset button[type="submit"]')
        assert page.locator(f'#cases tr[data-trace="{bad}"] .expect').inner_text() == "as judged"
        assert page.locator("#case-count").inner_text() == "2 cases"

        # a form without the page's CSRF token is refused
        forged = page.request.post(
            f"{server.admin_url}/trajectories/{good}/dataset", form={"name": "x", "by": "m"}
        )
        assert forged.status == 403

        # resolving under the pack that fired it: refused on the page, naming the run
        page.goto(f"{server.admin_url}/decisions/{decision_id}")
        page.fill('#resolve input[name="by"]', "ana")
        page.click('#resolve button[type="submit"]')
        error = page.locator("p.error").inner_text()
        assert "recertification refused" in error and bad in error
        assert page.locator("#state").inner_text() == "firing"
        page.goto(f"{server.admin_url}/datasets")
        assert page.locator(f'#datasets tr[data-dataset="{decision_id}"]').count() == 1
