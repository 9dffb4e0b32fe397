"""A dataset replayed under packs: each case checked against what it expects of each pack."""

from __future__ import annotations

from dataclasses import dataclass, field

from collector.datasets.cases import Case, expectation_for
from collector.replay.check import check_case
from evaluators.rulepack import RulePack


@dataclass(frozen=True)
class CaseOutcome:
    """One case under the packs: each pack's verdict, and what was not as expected."""

    trace_id: str
    verdicts: dict[str, str] = field(default_factory=dict)  # pack -> pass|fail|review|none
    problems: list[str] = field(default_factory=list)  # "pack: ..."
    objections: list[str] = field(default_factory=list)  # "pack/rule: fail reason: message"

    @property
    def clean(self) -> bool:
        return not self.problems

    def as_json(self) -> dict[str, object]:
        return {
            "trace_id": self.trace_id,
            "verdicts": self.verdicts,
            "problems": self.problems,
            "objections": self.objections,
        }


def run_case(case: Case, packs: list[RulePack]) -> CaseOutcome:
    """The case under every pack it expects something of; a case that expects nothing of any
    of them is not clean (it proves nothing about them)."""
    outcome = CaseOutcome(case.trace_id)
    for pack in packs:
        expect = expectation_for(case, pack.name)
        if expect is None:
            continue
        checked = check_case({**case.trajectory, "expect": expect}, pack)
        outcome.verdicts[pack.name] = checked.verdict
        outcome.problems.extend(f"{pack.name}: {p}" for p in checked.problems)
        outcome.objections.extend(f"{pack.name}/{line}" for line in checked.objections)
    if not outcome.verdicts:
        names = ", ".join(p.name for p in packs)
        outcome.problems.append(
            f"no expectation for {names}: not judged by them live, no labels, no expected outcome"
        )
    return outcome


def run_dataset(cases: list[Case], packs: list[RulePack]) -> list[CaseOutcome]:
    return [run_case(case, packs) for case in cases]
