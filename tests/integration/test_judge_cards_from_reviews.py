"""`sextant judge calibrate --from-reviews`: an EvaluatorCard from reviewers' labels on runs the
judge scored equals a count by hand, each run certifies one card only, and `sextant judge
rates` reports the judge's failure rate per target corrected by that card."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser

from collector.console.canary import percent, target_url
from collector.targets import Target
from tests.support.browser import new_page
from tests.support.cli import sextant, sextant_streams
from tests.support.reviews import (
    JUDGE_FAILED,
    JUDGE_FAILED_UNCALIBRATED,
    JUDGE_PACK,
    JUDGE_PASSED,
    JUDGE_UNAVAILABLE,
    TARGET,
    ReviewedRuns,
)
from tests.support.server import RunningServer, serve

Z = 1.959964  # the two-sided 95 % normal quantile
RULE = "support-judges/helpful-answer"


def wilson_lower_by_hand(k: int, n: int) -> float:
    p = k / n
    centre = (p + Z * Z / (2 * n)) / (1 + Z * Z / n)
    half = Z / (1 + Z * Z / n) * (p * (1 - p) / n + Z * Z / (4 * n * n)) ** 0.5
    return centre - half


@pytest.fixture
def server(tmp_path: Path) -> Iterator[RunningServer]:
    running = serve(tmp_path, {"judges": JUDGE_PACK}, judges={"enabled": False})
    yield running
    running.stop()


def two_hundred_reviewed_runs(runs: ReviewedRuns) -> None:
    """200 runs people labelled: of the 100 they failed the judge failed 90 (50 of them as an
    uncalibrated judge's review), passed 8 and could not judge 2; of the 90 they passed it
    passed 85 and failed 5; 10 they labelled not applicable. Around them, labels that do not
    count: an earlier label a later one replaced, labels on the pack's previous version and
    on another rule."""
    runs.reviewed(JUDGE_FAILED, "fail", 40)
    runs.reviewed(JUDGE_FAILED_UNCALIBRATED, "fail", 45)
    for _ in range(5):  # first passed by one reviewer, then failed by another: the latter wins
        answered = runs.judged(JUDGE_FAILED_UNCALIBRATED)
        runs.label(answered, "pass", reviewer="bo")
        runs.label(answered, "fail", reviewer="cy")
    runs.reviewed(JUDGE_PASSED, "fail", 8)
    runs.reviewed(JUDGE_UNAVAILABLE, "fail", 2)
    runs.reviewed(JUDGE_PASSED, "pass", 85)
    runs.reviewed(JUDGE_FAILED_UNCALIBRATED, "pass", 5)
    runs.reviewed(JUDGE_PASSED, "not_applicable", 6)
    runs.reviewed(JUDGE_FAILED_UNCALIBRATED, "not_applicable", 4)
    # not counted: judged by version 0.9.0 of the pack, or labels of another rule
    runs.reviewed(JUDGE_PASSED, "fail", 3, pack_version="0.9.0")
    other = runs.judged(JUDGE_PASSED)
    runs.label({**other, "rule_id": "looks-the-customer-up", "rule_type": "presence"}, "fail")


def calibrate(capsys: pytest.CaptureFixture[str], server: RunningServer, *flags: str) -> tuple:
    code, out, err = sextant_streams(
        capsys, "judge", "calibrate", RULE, "--from-reviews", *flags,
        "--url", server.admin_url, "--json",
    )  # fmt: skip
    return code, (json.loads(out) if code in (0, 1) and out else None), err


def test_a_card_from_reviewers_labels_counts_them_once(
    server: RunningServer, capsys: pytest.CaptureFixture[str]
) -> None:
    runs = ReviewedRuns()
    two_hundred_reviewed_runs(runs)
    runs.store(server)

    code, card, err = calibrate(capsys, server)
    assert code == 0, err  # both lower bounds above 0.8: certified
    assert (card["source"], card["cases"], card["not_applicable"], card["unjudged"]) == (
        "reviews",
        190,
        10,
        2,
    )
    assert (card["positives"], card["negatives"], card["reused_labels"]) == (98, 90, 0)
    assert card["agreement"] == pytest.approx((90 + 85) / 188)
    assert card["tpr"] == pytest.approx(90 / 98) and card["tnr"] == pytest.approx(85 / 90)
    assert card["tpr_lower"] == pytest.approx(wilson_lower_by_hand(90, 98), abs=1e-6)
    assert card["tnr_lower"] == pytest.approx(wilson_lower_by_hand(85, 90), abs=1e-6)
    assert card["certified"] is True
    first = card["card_id"]
    stored = server.query_dicts("SELECT * FROM evaluator_cards")
    assert [(c["card_id"], c["source"]) for c in stored] == [(first, "reviews")]
    # The runs it used, each once, with who labelled them: the 188 the judge judged.
    used = server.query_dicts("SELECT * FROM card_labels WHERE card_id = ?", [first])
    assert len(used) == 188 and len({u["trace_id"] for u in used}) == 188
    assert sum(u["fails"] and u["flagged"] for u in used) == 90
    assert sum(not u["fails"] and not u["flagged"] for u in used) == 85
    assert sum(u["reviewer"] == "cy" for u in used) == 5 and not any(u["reused"] for u in used)

    # Again on the same labels: refused, naming how many were used and by which card.
    code, _, err = calibrate(capsys, server)
    assert code == 1
    used_by = f"were already used by card {first}"
    assert f"188 of the 190 labels on support-judges@1.0.0/helpful-answer {used_by}" in err
    assert "(188)" in err and "--include-used" in err
    assert server.query("SELECT count(*) FROM evaluator_cards") == [(1,)]

    # Ten fresh failures and ten fresh passes cannot make a card that proves 0.8: still refused.
    runs.reviewed(JUDGE_FAILED, "fail", 10)
    runs.reviewed(JUDGE_PASSED, "pass", 10)
    runs.store(server)
    code, _, err = calibrate(capsys, server)
    assert code == 1
    assert "the 22 fresh ones (10 failed and 10 passed by people, judged)" in err
    assert "at least 16 failed and 16 passed" in err

    # Asked to include the used ones: a card of every label, which says it reuses 188.
    code, card, err = calibrate(capsys, server, "--include-used")
    assert code == 0, err
    assert (card["cases"], card["positives"], card["negatives"]) == (210, 108, 100)
    assert card["reused_labels"] == 188
    assert card["tpr"] == pytest.approx(100 / 108) and card["tnr"] == pytest.approx(95 / 100)
    reused = server.query(
        "SELECT count(*), count(*) FILTER (WHERE reused) FROM card_labels WHERE card_id = ?",
        [card["card_id"]],
    )
    assert reused == [(208, 188)]
    code, printed = sextant(
        capsys, "judge", "calibrate", RULE, "--from-reviews", "--url", server.admin_url
    )
    assert code == 1 and "208 of the 210 labels" in printed

    # Enough fresh runs (16 failed, 16 passed): a card of those alone, the used ones left out.
    runs.reviewed(JUDGE_FAILED, "fail", 14)
    runs.reviewed(JUDGE_PASSED, "fail", 2)
    runs.reviewed(JUDGE_PASSED, "pass", 16)
    runs.store(server)
    code, printed = sextant(
        capsys, "judge", "calibrate", RULE, "--from-reviews", "--url", server.admin_url
    )
    assert "208 labels an earlier card used were left out" in printed
    code, out, _ = sextant_streams(capsys, "judge", "cards", "--url", server.admin_url, "--json")
    latest = json.loads(out)["cards"][0]
    assert (latest["cases"], latest["positives"], latest["negatives"], latest["unjudged"]) == (
        34,
        16,
        16,
        2,
    )
    assert latest["tpr"] == pytest.approx(14 / 16) and latest["reused_labels"] == 0


def test_a_calibrated_judges_failure_rate_is_corrected_per_target(
    server: RunningServer, capsys: pytest.CaptureFixture[str], chromium: Browser
) -> None:
    runs = ReviewedRuns()
    two_hundred_reviewed_runs(runs)
    # Runs nobody labelled, on the same target and on its next version.
    for i in range(300):
        runs.judged(JUDGE_FAILED_UNCALIBRATED if i < 75 else JUDGE_PASSED)
    canary = (*TARGET[:2], "2.1.0")
    for i in range(100):
        runs.judged(JUDGE_FAILED if i < 2 else JUDGE_PASSED, target=canary)
    for _ in range(5):
        runs.judged(JUDGE_UNAVAILABLE, target=canary)  # no judgement: not counted
    runs.store(server)
    # Judged by version 1.0.0 on 2.0.0: failed 40 + 45 + 5 + 5 + 4 labelled and 75 unlabelled
    # runs, passed 8 + 85 + 6 + 1 labelled and 225 unlabelled ones (2 not judged).
    judged_on = {TARGET: (499, 174), canary: (100, 2)}

    code, out, err = sextant_streams(
        capsys, "judge", "rates", RULE, "--url", server.admin_url, "--json"
    )
    assert code == 0, err
    rates = {(r["service"], r["agent"], r["version"]): r for r in json.loads(out)["rates"]}
    assert {r["why"] for r in rates.values()} == {
        "no EvaluatorCard for this pack version, model and prompt"
    }
    assert rates[canary]["corrected_rate"] is None

    code, card, err = calibrate(capsys, server)
    assert code == 0, err
    tpr, tnr = 90 / 98, 85 / 90
    code, out, err = sextant_streams(
        capsys, "judge", "rates", RULE, "--url", server.admin_url, "--json"
    )
    rates = {(r["service"], r["agent"], r["version"]): r for r in json.loads(out)["rates"]}
    assert set(rates) == {TARGET, canary}
    for target, (judged, flagged) in judged_on.items():
        rate = rates[target]
        assert (rate["judged"], rate["flagged"]) == (judged, flagged)
        observed = flagged / judged
        assert rate["observed_rate"] == pytest.approx(observed)
        by_hand = min(1.0, max(0.0, (observed + tnr - 1) / (tpr + tnr - 1)))
        assert rate["corrected_rate"] == pytest.approx(by_hand)
        assert rate["corrected_lower"] <= rate["corrected_rate"] <= rate["corrected_upper"]
        assert (rate["card_id"], rate["tpr"], rate["tnr"]) == (
            card["card_id"],
            pytest.approx(tpr),
            pytest.approx(tnr),
        )
    # 2 % flagged is under the judge's false-alarm rate (5.6 %): the true rate is clipped to 0.
    assert rates[canary]["corrected_rate"] == 0.0 and rates[canary]["corrected_lower"] == 0.0
    # At 35 % flagged its false alarms (5.6 % of 65 %) outnumber its misses (8.2 % of 35 %).
    assert 0 < rates[TARGET]["corrected_rate"] < rates[TARGET]["observed_rate"]

    # One target, as a table for people.
    code, printed = sextant(
        capsys, "judge", "rates", "--target", "support-desk/support-agent/2.1.0",
        "--url", server.admin_url,
    )  # fmt: skip
    assert code == 0 and "2.1.0" in printed and "2.0.0" not in printed
    assert "Rogan-Gladen" in printed

    # The target's page in the console shows the same numbers.
    with new_page(chromium, javascript=False) as page:
        page.goto(server.admin_url + target_url(Target(*TARGET)))
        row = page.locator(f'table.judges tr[data-rule="{RULE}"]')
        shown = rates[TARGET]
        assert row.locator("td.judged").inner_text() == "499"
        assert row.locator("td.observed").inner_text() == percent(shown["observed_rate"])
        assert row.locator("td.corrected").inner_text() == (
            f"{percent(shown['corrected_rate'])} [{percent(shown['corrected_lower'])}"
            f" – {percent(shown['corrected_upper'])}]"
        )
        page.goto(server.admin_url + target_url(Target("support-desk", "support-agent", "9")))
        assert page.locator("#no-judges").is_visible()


def test_labels_only_on_runs_the_judge_failed_do_not_certify_it(
    server: RunningServer, capsys: pytest.CaptureFixture[str]
) -> None:
    """Reviewers who answer only an uncalibrated judge's reviews see only the runs it failed:
    the card shows no bad run it passed, proves nothing of its false alarms, and says why."""
    runs = ReviewedRuns()
    runs.reviewed(JUDGE_FAILED_UNCALIBRATED, "fail", 40)
    runs.reviewed(JUDGE_FAILED_UNCALIBRATED, "pass", 10)
    runs.store(server)
    code, printed = sextant(
        capsys, "judge", "calibrate", RULE, "--from-reviews", "--url", server.admin_url
    )
    assert code == 1 and "NOT certified" in printed
    assert "every labelled run is one the judge failed" in printed
    card = server.query_dicts("SELECT tpr, tnr FROM evaluator_cards")[0]
    assert (card["tpr"], card["tnr"]) == (1.0, 0.0)


def test_bad_requests_are_refused_with_what_to_give(
    server: RunningServer, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    url = ("--url", server.admin_url)
    code, printed = sextant(capsys, "judge", "rates", "support-judges/no-such-rule", *url)
    assert code == 1 and "pack support-judges has no judge rule 'no-such-rule'" in printed
    code, printed = sextant(capsys, "judge", "rates", "--window", "soon", *url)
    assert code == 1 and "window: expected a duration such as 60s" in printed
    code, printed = sextant(capsys, "judge", "rates", "--target", "support-desk", *url)
    assert code == 2 and "give SERVICE/AGENT/VERSION" in printed
    cases = tmp_path / "cases.jsonl"
    cases.write_text("")
    code, printed = sextant(
        capsys, "judge", "calibrate", RULE, "--cases", str(cases), "--include-used", *url
    )
    assert code == 2 and "--include-used goes with --from-reviews" in printed
    code, printed = sextant(capsys, "judge", "calibrate", RULE, "--from-reviews", *url)
    assert code == 1 and "no reviewers' labels (pass or fail) on runs" in printed
