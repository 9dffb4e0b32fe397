"""Recertification: a decision is resolved by hand only once a dataset replays clean under the
packs in force (the fixed version of the packs it cites).

The dataset is the one the person names, else the one named by the decision's id, made from
its evidence the first time it is needed: each run the decision cites must then PASS (or, where
reviewers labelled it, get the labelled verdicts). Each attempt, refused or not, is recorded in
the decision's history with the dataset, the packs and versions, and the cases still failing."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from collector.datasets.run import CaseOutcome, run_dataset
from collector.datasets.service import source_of
from collector.datasets.store import evidence_cases, has_dataset, load_cases
from collector.decisions.engine import DecisionEngine
from collector.decisions.history import decision_history
from collector.decisions.state import DecisionState
from collector.errors import PermanentError, SextantError
from collector.evaluation.packs import PackSource, compiled
from collector.store.database import Database
from collector.store.writer import Writer
from evaluators.base import Decision
from evaluators.rulepack import RulePack

MAX_LISTED = 10  # failing cases named in a refusal


class NotRecertified(PermanentError):
    """The dataset does not replay clean yet: the decision stays as it is."""

    http_status = 409


@dataclass(frozen=True)
class Recertification:
    dataset: str
    packs: list[str]  # name@version replayed
    outcomes: list[CaseOutcome]
    created: bool = False  # the dataset was made from the decision's evidence now

    @property
    def failing(self) -> list[CaseOutcome]:
        return [o for o in self.outcomes if not o.clean]

    @property
    def passed(self) -> bool:
        return not self.failing

    def summary(self) -> str:
        packs = ", ".join(self.packs)
        clean = len(self.outcomes) - len(self.failing)
        result = "passed" if self.passed else "refused"
        return (
            f"recertification {result}: dataset {self.dataset} under {packs}:"
            f" {clean} of {len(self.outcomes)} cases as expected"
        )

    def refusal(self) -> str:
        """Why the decision cannot be resolved yet: the cases that still fail, and how."""
        lines = [self.summary() + "; still failing:"]
        for o in self.failing[:MAX_LISTED]:
            lines.append(f"  {o.trace_id}: " + "; ".join(o.problems))
        if len(self.failing) > MAX_LISTED:
            lines.append(f"  ... and {len(self.failing) - MAX_LISTED} more")
        return "\n".join(lines)

    def as_json(self) -> dict[str, Any]:
        return {
            "dataset": self.dataset,
            "packs": self.packs,
            "result": "pass" if self.passed else "fail",
            "cases": len(self.outcomes),
            "failing": [o.as_json() for o in self.failing],
            "created": self.created,
        }


class Recertifier:
    """Replays a decision's dataset under the packs in force, making the dataset if needed."""

    def __init__(
        self,
        database: Database,
        writer: Writer,
        packs: PackSource,
        now: Callable[[], datetime],
        required: list[Decision],
    ) -> None:
        self.database = database
        self.writer = writer
        self.packs = packs
        self.now = now
        self.required = frozenset(required)

    def needed(self, decision_id: str, dataset: str | None) -> bool:
        """Whether resolving this decision takes a recertification: its kind requires one by
        `decisions.recertify`, or the person named a dataset."""
        if dataset:
            return True
        history = self.database.read(decision_history, decision_id)
        if not history:
            raise LookupError(f"no decision {decision_id}")
        return Decision(history[-1]["decision"]) in self.required

    def recertify(self, decision_id: str, by: str, dataset: str | None) -> Recertification:
        history = self.database.read(decision_history, decision_id)
        if not history:
            raise LookupError(f"no decision {decision_id}")
        name = dataset or decision_id
        created = False
        if not self.database.read(lambda c: has_dataset(source_of(c), name)):
            if dataset and dataset != decision_id:
                raise SextantError(f"no dataset {dataset!r}: add runs to it first")
            rows = self.database.read(
                lambda c: evidence_cases(
                    source_of(c), name, decision_id, "pass", by, self.now(), True
                )
            )
            self.writer.record({"dataset_cases": rows})
            created = True
        cases = self.database.read(lambda c: load_cases(source_of(c), name))
        packs = self.packs_of(history[-1]["packs"] or [])
        outcomes = run_dataset(cases, packs)
        return Recertification(name, [f"{p.name}@{p.version}" for p in packs], outcomes, created)

    def packs_of(self, cited: list[str]) -> list[RulePack]:
        """The packs in force that the decision cites (by name), or every pack in force when it
        cites none; an error naming a cited pack that is no longer in force."""
        in_force = {p.name: p for p in self.packs.snapshot()}
        names = sorted({c.rsplit("@", 1)[0] for c in cited}) or sorted(in_force)
        gone = [n for n in names if n not in in_force]
        if gone:
            raise SextantError(f"pack {', '.join(gone)} is not in force: nothing to replay under")
        return [compiled(in_force[n]) for n in names]


def resolve(
    engine: DecisionEngine,
    recertifier: Recertifier,
    decision_id: str,
    by: str,
    note: str,
    dataset: str | None = None,
) -> DecisionState:
    """Resolve by hand, after a clean recertification where one is needed. A refused one is
    recorded in the history and raised as NotRecertified, naming the cases still failing."""
    engine.find(decision_id)  # only an active decision can be resolved (or replayed for)
    if not recertifier.needed(decision_id, dataset):
        return engine.resolve(decision_id, by, note)
    outcome = recertifier.recertify(decision_id, by, dataset)
    if not outcome.passed:
        engine.recertified(decision_id, by, outcome.summary(), outcome.as_json())
        raise NotRecertified(outcome.refusal())
    return engine.resolve(decision_id, by, note, (outcome.summary(), outcome.as_json()))
