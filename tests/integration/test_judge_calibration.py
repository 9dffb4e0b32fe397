"""`sextant judge calibrate` on labelled runs: the EvaluatorCard equals a count by hand, and a
judge whose card falls short of the pack's bounds cannot QUARANTINE; one that meets them can."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from collector.bench.judge import ScriptedJudge, start_judge
from tests.integration.test_judges import KEY_ENV, judge_pack, judged, run
from tests.support.admin import decisions, firing
from tests.support.cli import sextant
from tests.support.server import DECIDE_FAST, FAST, RunningServer, serve
from tests.support.wait import wait_for

Z = 1.959964  # the two-sided 95 % normal quantile


def wilson_lower_by_hand(k: int, n: int) -> float:
    p = k / n
    centre = (p + Z * Z / (2 * n)) / (1 + Z * Z / n)
    half = Z / (1 + Z * Z / n) * (p * (1 - p) / n + Z * Z / (4 * n * n)) ** 0.5
    return centre - half


@pytest.fixture
def judge_server() -> Iterator[ScriptedJudge]:
    scripted = start_judge()
    yield scripted
    scripted.close()


def labelled_cases(server: RunningServer, capsys: pytest.CaptureFixture[str], out: Path) -> None:
    """24 runs people labelled: the judge (which fails BAD answers) finds 11 of the 12 they
    failed and passes 11 of the 12 they passed."""
    plan = [("BAD", "fail")] * 11 + [("GOOD", "fail")] + [("GOOD", "pass")] * 11 + [("BAD", "pass")]
    ids = [run(server, f"{answer} answer {i}") for i, (answer, _) in enumerate(plan)]
    judged(server, ids)
    code, printed = sextant(
        capsys, "export", "case", *ids, "--pack", "support-judges", "--out", str(out),
        "--url", server.admin_url,
    )  # fmt: skip
    assert code == 0, printed
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    by_trace = dict(zip(ids, (label for _, label in plan), strict=True))
    for case in lines:
        assert case["expect"]["answer"].endswith("answer " + str(ids.index(case["trace_id"])))
        assert case["expect"]["tool_calls"] == [
            {"name": "lookup_customer", "arguments": {"customer": "C-1"}}
        ]
        case["expect"]["rules"]["helpful-answer"] = by_trace[case["trace_id"]]
    out.write_text("".join(json.dumps(case) + "\n" for case in lines))


def test_a_judge_gates_only_with_a_card_that_meets_the_bounds(
    tmp_path: Path,
    judge_server: ScriptedJudge,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv(KEY_ENV, "sk-test-judge")
    pack = judge_pack(judge_server.base_url)
    server = serve(
        tmp_path,
        {"judges": pack},
        assembler=FAST,
        judges={"tick_seconds": 0.05},
        rules={"reload_seconds": 0.1},
        decisions=DECIDE_FAST,
    )
    try:
        cases = tmp_path / "labelled.jsonl"
        labelled_cases(server, capsys, cases)
        # The same cases stay regression cases: rules test runs what it can offline.
        code, printed = sextant(
            capsys, "rules", "test", str(tmp_path / "rules" / "judges.yaml"), "--cases", str(cases)
        )
        assert code == 0 and "24 of 24 cases as expected" in printed, printed
        assert "not run offline (judges, evaluation events): helpful-answer" in printed
        code, printed = sextant(
            capsys, "judge", "calibrate", "support-judges/helpful-answer", "--cases", str(cases),
            "--url", server.admin_url, "--json",
        )  # fmt: skip
        assert code == 1, printed  # 11 of 12 is no proof of a TPR of 0.8 or more
        card = json.loads(printed)
        assert (card["cases"], card["positives"], card["negatives"], card["unjudged"]) == (
            24,
            12,
            12,
            0,
        )
        assert card["agreement"] == pytest.approx(22 / 24)
        assert card["tpr"] == pytest.approx(11 / 12) and card["tnr"] == pytest.approx(11 / 12)
        assert card["tpr_lower"] == pytest.approx(wilson_lower_by_hand(11, 12), abs=1e-6)
        assert card["tnr_lower"] == pytest.approx(wilson_lower_by_hand(11, 12), abs=1e-6)
        assert (card["model"], card["pack_version"], card["certified"]) == (
            "judge-mini",
            "1.0.0",
            False,
        )
        stored = server.query_dicts("SELECT * FROM evaluator_cards")
        assert len(stored) == 1 and stored[0]["tpr_lower"] == pytest.approx(card["tpr_lower"])

        bad = run(server, "BAD after the card")
        result = judged(server, [bad])[bad]
        assert (result["verdict"], result["reason"]) == ("review", "judge_uncalibrated")
        assert "under min_tpr 0.8" in result["message"]
        wait_for(lambda: decisions(server, state="firing", decision="REVIEW"))
        assert decisions(server, decision="QUARANTINE") == []

        # Bounds the card meets (its lower bounds are about 0.65): the same judge now gates.
        loosened = pack.replace(
            "  price: {input: 0.5, output: 2.0}",
            "  price: {input: 0.5, output: 2.0}\n  min_tpr: 0.6\n  min_tnr: 0.6",
        )
        assert server.rules_dir is not None
        (server.rules_dir / "judges.yaml").write_text(loosened)
        wait_for(lambda: "min_tpr" in str(server.pipeline.packs.snapshot()[0].text))
        worse = run(server, "BAD once certified")
        result = judged(server, [worse])[worse]
        assert (result["verdict"], result["reason"]) == ("fail", "unhelpful_answer")
        assert result["requested_decision"] == "QUARANTINE"
        quarantined = firing(server, "QUARANTINE", service_name="support-desk")
        assert worse in quarantined["evidence_trace_ids"]
    finally:
        server.stop()
