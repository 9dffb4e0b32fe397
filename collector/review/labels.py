"""A reviewer's label as a result row: a verdict like any rule's, from a person, answering the
REVIEW result it names (same trace, revision, pack and rule)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import orjson
import pyarrow as pa

from collector.errors import PermanentError
from collector.store.tables import rows_table
from evaluators.base import Decision, Verdict

# What a person may answer, and the reason code each label carries.
LABELS = {
    Verdict.PASS: "human_pass",
    Verdict.FAIL: "human_fail",
    Verdict.NOT_APPLICABLE: "human_not_applicable",
}
MAX_COMMENT = 10_000  # characters
# Copied from the answered result: the run, the rule and its pack, the target.
COPIED = (
    *("trace_id", "revision", "pack", "pack_version", "pack_sha256", "rule_id", "rule_type"),
    *("severity", "service_name", "agent_name", "service_version", "evidence_span_ids"),
)


def verdict_of(text: str) -> Verdict:
    """`pass`, `fail` or `not_applicable` (`n.a.` and `na` too); PermanentError otherwise."""
    given = {"n.a.": "not_applicable", "na": "not_applicable"}.get(text.lower(), text.lower())
    try:
        verdict = Verdict(given)
    except ValueError:
        verdict = None
    if verdict not in LABELS:
        raise PermanentError(f"verdict is one of pass, fail, not_applicable; got {text!r}")
    return verdict


def comment_of(text: str | None) -> str:
    comment = (text or "").strip()
    if len(comment) > MAX_COMMENT:
        raise PermanentError(f"the comment is {len(comment)} characters; at most {MAX_COMMENT}")
    return comment


def label_row(
    answered: dict[str, Any],
    verdict: Verdict,
    reviewer: str,
    comment: str,
    at: datetime,
    on_fail: Decision | None,
) -> dict[str, Any]:
    """The label of `answered` (a review item's result row). A FAIL asks for the rule's
    `on_fail` (FAIL when the rule is no longer in force) so that, without a policy, it decides
    what the rule's own failure would; a pass or n.a. asks for nothing."""
    answers = {
        "verdict": answered["verdict"],
        "reason": answered["reason"],
        "evaluated_at": answered["evaluated_at"].isoformat() + "Z",
    }
    return {
        **{column: answered[column] for column in COPIED},
        "verdict": verdict.value,
        "reason": LABELS[verdict],
        "message": comment,
        "requested_decision": (on_fail or Decision.FAIL).value if verdict == Verdict.FAIL else None,
        "evaluated_at": at,
        "scope": "trajectory",
        "origin": "live",
        "source": "human",
        "reviewer": reviewer,
        "details": orjson.dumps({"answers": answers}).decode(),
    }


def label_table(row: dict[str, Any]) -> pa.Table:
    return rows_table("results", [row])
