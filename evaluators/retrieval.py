"""retrieval: grounding evidence of a run's answer, from the documents its retrieval steps
returned (evaluators/documents.py).

Each check the rule sets must hold: a retrieval before the answer (the run's last model call);
a run without a retrieval fails only a rule that asks for one (`before_answer`, `min_documents`);
at least `min_documents` documents (scoring at least `min_score` when given); none older than
`max_age` by the date at `age_field` in its metadata, at the retrieval's time; none whose access
label (`access.label` in its metadata) the run's user may not see. A check the documents cannot
answer (no score, no date, no label, a retrieval that recorded nothing about its documents) is
a review, never a pass. A retrieval that recorded an empty list found nothing: that grounds
nothing, so `min_documents` and `min_score` fail (`no_documents`), and holds nothing stale or
forbidden, so `max_age` and `access` pass.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Literal

from pydantic import Field, model_validator

from evaluators.base import Finding, Verdict
from evaluators.documents import Document, documents
from evaluators.durations import duration_text
from evaluators.matchers import MISSING, StepMatcher, Strict, at_path, checked_path, text_matches
from evaluators.model import CLOCK_SLACK_NS, Step, Trajectory
from evaluators.rules import RuleBase
from evaluators.window import Seconds


class Access(Strict):
    """Which documents the run's user may be given, by the access label in their metadata."""

    label: str = Field("$.access", description="JSON path to the label in a document's metadata.")
    allowed: list[str] = Field(default_factory=list, description="Labels any user may see.")
    users: dict[str, list[str]] = Field(
        default_factory=dict, description="User id glob -> the further labels those users may see."
    )
    unlabeled: Literal["allow", "review", "deny"] = Field(
        "review", description="A document without a label: allowed, reviewed, or a violation."
    )

    def permitted(self, user: str | None) -> set[str]:
        extra = (labels for glob, labels in self.users.items() if user and text_matches(glob, user))
        return {*self.allowed, *(label for labels in extra for label in labels)}


class RetrievalRule(RuleBase):
    type: Literal["retrieval"]
    steps: StepMatcher = Field(
        default_factory=lambda: StepMatcher(kind="retrieval"),
        description="Which steps are the retrievals (default: retrieval steps).",
    )
    before_answer: bool = Field(True, description="A retrieval must end before the answer.")
    min_documents: int | None = Field(None, ge=1, description="Documents returned, at least.")
    min_score: float | None = Field(None, description="Only documents scoring this count.")
    max_age: Seconds | None = Field(None, description="The oldest a document may be (e.g. 180d).")
    age_field: str = Field("$.updated", description="JSON path to a document's date (ISO 8601).")
    access: Access | None = Field(None, description="Documents' access labels against the user.")

    @model_validator(mode="after")
    def _paths(self) -> RetrievalRule:
        checked_path(self.age_field)
        if self.access is not None:
            checked_path(self.access.label)
        return self


def answer_of(t: Trajectory) -> Step | None:
    return next((s for s in reversed(t.steps) if s.kind == "llm"), None)


def date_of(doc: Document, path: str) -> datetime | None:
    value = at_path(doc.metadata, path)
    if value is MISSING or not isinstance(value, str):
        return None
    try:
        found = datetime.fromisoformat(value)
    except ValueError:
        return None
    return found if found.tzinfo else found.replace(tzinfo=UTC)


def evaluate_retrieval(t: Trajectory, rule: RetrievalRule) -> Finding:
    retrievals = [s for s in t.steps if rule.steps.matches(s)]
    answer = answer_of(t)
    if rule.before_answer and answer is not None:
        start = answer.start_time_unix_nano + CLOCK_SLACK_NS
        retrievals = [s for s in retrievals if s.end_time_unix_nano <= start]
    if not retrievals and not (rule.before_answer or rule.min_documents):
        return Finding(Verdict.NOT_APPLICABLE, f"no {rule.steps.describe()} step")
    if not retrievals:
        where = " before the answer" if rule.before_answer and answer is not None else ""
        shown = (answer.span_id,) if answer is not None and where else ()
        return Finding(Verdict.FAIL, f"no {rule.steps.describe()} step{where}", shown)
    found = [(s, documents(s)) for s in retrievals]
    docs = [(s, d) for s, listed in found for d in listed or ()]
    checks = rule.min_documents or rule.min_score is not None or rule.max_age or rule.access
    if not docs and checks:
        asked = tuple(s.span_id for s in retrievals)
        if any(listed is None for _, listed in found):
            # the instrumentation wrote no list at all: what came back is not known
            message = "the retrieval recorded nothing about its documents"
            return Finding(Verdict.REVIEW, message, asked, reason="document_unknown")
        if rule.min_documents or rule.min_score is not None:
            message = "the retrieval returned no documents: nothing grounds the answer"
            return Finding(Verdict.FAIL, message, asked, reason="no_documents")
        message = "the retrieval returned no documents: none is stale or beyond access"
        return Finding(Verdict.PASS, message, asked)
    failed: list[str] = []
    unknown: list[str] = []
    evidence: dict[str, None] = {}
    for check in (count_check, age_check, access_check):
        bad, why, spans = check(t, rule, docs)
        (failed if bad else unknown).extend([why] if why else [])
        evidence.update(dict.fromkeys(spans))
    names = ", ".join(f"{s.name} (seq {s.seq})" for s in retrievals)
    if failed:
        return Finding(Verdict.FAIL, "; ".join(failed), tuple(evidence))
    if unknown:
        return Finding(
            Verdict.REVIEW, "; ".join(unknown), tuple(evidence), reason="document_unknown"
        )
    return Finding(Verdict.PASS, f"{len(docs)} document(s) from {names}", tuple(evidence))


Check = tuple[bool, str | None, list[str]]  # (a violation, what was found, evidence span ids)


def count_check(t: Trajectory, rule: RetrievalRule, docs: list[tuple[Step, Document]]) -> Check:
    if rule.min_documents is None and rule.min_score is None:
        return False, None, []
    wanted = rule.min_documents or 1
    counted = docs
    if rule.min_score is not None:
        scored = [(s, d) for s, d in docs if d.score is not None]
        if not scored:
            return False, f"{len(docs)} document(s) without a score", [s.span_id for s, _ in docs]
        counted = [(s, d) for s, d in scored if d.score is not None and d.score >= rule.min_score]
        unscored = len(docs) - len(scored)
        if len(counted) < wanted <= len(counted) + unscored:  # the unscored ones would decide
            spans = [s.span_id for s, d in docs if d.score is None]
            return False, f"{unscored} document(s) without a score", spans
    if len(counted) >= wanted:
        return False, None, []
    spans = list(dict.fromkeys(s.span_id for s, _ in docs))
    above = f" scoring {rule.min_score:g} or more" if rule.min_score is not None else ""
    return True, f"{len(counted)} document(s){above}, fewer than {wanted}", spans


def age_check(t: Trajectory, rule: RetrievalRule, docs: list[tuple[Step, Document]]) -> Check:
    if rule.max_age is None:
        return False, None, []
    old, undated = [], []
    for i, (s, d) in enumerate(docs):
        date = date_of(d, rule.age_field)
        if date is None:
            undated.append((s, d))
            continue
        at = datetime.fromtimestamp(s.start_time_unix_nano / 1e9, UTC)
        if (at - date).total_seconds() > rule.max_age:
            old.append((s, d, i))
    if old:
        ids = ", ".join(d.id or f"#{i}" for _, d, i in old)  # unnamed: its place in the answer
        return (
            True,
            f"{len(old)} document(s) older than {duration_text(rule.max_age)}: {ids}",
            list(dict.fromkeys(s.span_id for s, _, _ in old)),
        )
    if undated:
        return False, f"{len(undated)} document(s) without a date at {rule.age_field}", []
    return False, None, []


def access_check(t: Trajectory, rule: RetrievalRule, docs: list[tuple[Step, Document]]) -> Check:
    if rule.access is None:
        return False, None, []
    permitted = rule.access.permitted(t.user_id)
    denied, unlabeled = [], []
    for s, d in docs:
        label = at_path(d.metadata, rule.access.label)
        if label is MISSING or label is None:
            unlabeled.append((s, d))
        elif str(label) not in permitted:
            denied.append((s, d, str(label)))
    if rule.access.unlabeled == "deny":
        denied.extend((s, d, "no label") for s, d in unlabeled)
    who = f"user {t.user_id}" if t.user_id else "an unknown user"
    if denied:
        shown = ", ".join(f"{d.id or '?'} ({label})" for _, d, label in denied)
        spans = list(dict.fromkeys(s.span_id for s, _, _ in denied))
        return True, f"{who} was given document(s) beyond their access: {shown}", spans
    if unlabeled and rule.access.unlabeled == "review":
        return False, f"{len(unlabeled)} document(s) without an access label", span_ids(unlabeled)
    return False, None, []


def span_ids(docs: list[tuple[Step, Document]]) -> list[str]:
    return list(dict.fromkeys(s.span_id for s, _ in docs))
