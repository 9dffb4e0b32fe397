"""One `sextant rules test` case under one pack: its results, its verdict and how they differ
from what the case expects. The command, datasets and recertification all check cases here."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from collector.errors import SextantError
from collector.judges.similar import case_results
from collector.replay.cases import ONLINE_ONLY, expected_of, trajectory_from_json
from evaluators.base import Result, overall_verdict
from evaluators.evaluate import evaluate_pack
from evaluators.rulepack import RulePack


@dataclass(frozen=True)
class Checked:
    """A case run under a pack: the results, the pack's verdict, and what was not as expected."""

    results: list[Result]
    verdict: str  # pass | fail | review | none (no rule applied)
    problems: list[str]

    @property
    def objections(self) -> list[str]:
        """The failing and reviewing rules, one line each, to say why a case is not clean."""
        return [
            f"{r.rule_id}: {r.verdict.value} {r.reason}: {r.message}"
            for r in self.results
            if r.verdict.value in ("fail", "review")
        ]


def online_rules(pack: RulePack) -> set[str]:
    """The pack's rules that cannot run offline (judges, evaluation events): never compared."""
    return {r.id for r in pack.rules if r.type in ONLINE_ONLY}


def problems_of(
    doc: dict[str, Any], pack: str, results: list[Result], verdict: str, online: set[str]
) -> list[str]:
    """How the pack's results differ from what the case expects of that pack; the rules in
    `online` (judges, evaluation events) cannot run here and are not compared."""
    try:
        expect = expected_of(doc, pack)
    except SextantError as exc:
        return [str(exc)]
    got = {r.rule_id: r.verdict.value for r in results}
    found = []
    if "verdict" in expect and expect["verdict"] != verdict:
        found.append(f"verdict {verdict}, expected {expect['verdict']}")
    for rule, want in expect.get("rules", {}).items():
        if rule not in online and got.get(rule, "not_evaluated") != want:
            found.append(f"{rule}: {got.get(rule, 'not evaluated')}, expected {want}")
    return found


def check_case(doc: dict[str, Any], pack: RulePack) -> Checked:
    """Evaluate the case's trajectory under `pack` and compare with its `expect`."""
    t = trajectory_from_json(doc)
    results = evaluate_pack(t, pack) + case_results(pack, t, doc.get("expect", {}).get("answer"))
    verdict = overall_verdict(results).value if results else "none"
    return Checked(
        results, verdict, problems_of(doc, pack.name, results, verdict, online_rules(pack))
    )
