"""Judged runs and reviewers' labels written into a running collector's store through its one
writer, as the judge stage and the review queue write them (results with `source = 'human'`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from collector.store.tables import rows_table
from tests.support.review_backlog import human_label
from tests.support.server import RunningServer

TARGET = ("support-desk", "support-agent", "2.0.0")
# A pack whose judge is never called here (nothing listens on port 9): its results are written
# as the judge stage writes them.
JUDGE_PACK = """
name: support-judges
version: 1.0.0
owner: support-sre
selector: {service: support-desk}
judges:
  endpoint: {base_url: "http://127.0.0.1:9/v1", model: judge-mini}
rules:
  - id: helpful-answer
    type: judge
    reason: unhelpful_answer
    on_fail: QUARANTINE
    prompt: "Grade the support agent's answer: {{ answer }}"
    pass_when: {score_gte: 0.5}
  - id: looks-the-customer-up
    type: presence
    reason: no_lookup
    step: {kind: tool, name: lookup_customer}
"""
# The judge's results as the judge stage stores them: (verdict, reason).
JUDGE_FAILED = ("fail", "unhelpful_answer")  # a calibrated judge's failure
JUDGE_FAILED_UNCALIBRATED = ("review", "judge_uncalibrated")  # its failure, gated to a review
JUDGE_PASSED = ("pass", "")
JUDGE_UNAVAILABLE = ("review", "judge_unavailable")  # no judgement


@dataclass
class ReviewedRuns:
    """Rows for one server: `judged` adds a run and the judge's result on it, `label` a
    reviewer's label answering that result; `store` writes what was added."""

    pack: str = "support-judges"
    pack_version: str = "1.0.0"
    rule: str = "helpful-answer"
    start: datetime = field(default_factory=lambda: datetime.now().replace(microsecond=0))
    trajectories: list[dict[str, Any]] = field(default_factory=list)
    results: list[dict[str, Any]] = field(default_factory=list)
    added: int = 0

    def at(self) -> datetime:
        """A distinct moment per row, in the order rows are made (the latest label wins)."""
        self.added += 1
        return self.start + timedelta(milliseconds=self.added)

    def judged(
        self,
        said: tuple[str, str],
        *,
        target: tuple[str, str, str] = TARGET,
        revision: int = 1,
        trace_id: str | None = None,
        pack_version: str | None = None,
    ) -> dict[str, Any]:
        """A run (unless `trace_id` names one already added) and the judge's result on it."""
        service, agent, version = target
        at = self.at()
        if trace_id is None:
            trace_id = f"{self.added:032x}"
            self.trajectories.append(
                {
                    "trace_id": trace_id,
                    "revision": revision,
                    "is_current": True,
                    "status": "ok",
                    "agent_run": True,
                    "service_name": service,
                    "agent_name": agent,
                    "service_version": version,
                    "root_span_id": f"{self.added:016x}",
                    "input": "Where is my parcel?",
                    "final_output": f"answer {self.added}",
                    "closed_at": at,
                }
            )
        verdict, reason = said
        result = {
            "trace_id": trace_id,
            "revision": revision,
            "pack": self.pack,
            "pack_version": pack_version or self.pack_version,
            "pack_sha256": "0" * 64,
            "rule_id": self.rule,
            "rule_type": "judge",
            "verdict": verdict,
            "reason": reason,
            "message": f"{verdict} by the judge",
            "evidence_span_ids": [f"{self.added:016x}"],
            "requested_decision": "REVIEW" if verdict == "review" else None,
            "service_name": service,
            "agent_name": agent,
            "service_version": version,
            "evaluated_at": at,
            "scope": "trajectory",
            "origin": "live",
        }
        self.results.append(result)
        return result

    def label(self, answered: dict[str, Any], verdict: str, reviewer: str = "ana") -> None:
        """A reviewer's label answering the result `answered`, as the review queue writes it."""
        self.results.append(
            human_label(answered, verdict, reviewer, self.at(), f"{reviewer} says {verdict}")
        )

    def reviewed(self, said: tuple[str, str], verdict: str, count: int, **kwargs: Any) -> None:
        """`count` runs the judge scored as `said` and a reviewer labelled `verdict`."""
        for _ in range(count):
            self.label(self.judged(said, **kwargs), verdict)

    def store(self, server: RunningServer) -> None:
        """Write the rows added since the last store, through the server's one writer."""
        tables = {}
        if self.trajectories:
            tables["trajectories"] = rows_table("trajectories", self.trajectories)
        if self.results:
            tables["results"] = rows_table("results", self.results)
        server.pipeline.writer.record(tables)
        self.trajectories, self.results = [], []
