"""Evaluation events in: `gen_ai.evaluation.result` log records become results.

Each event on a stored run becomes a result of origin `external` (pack `external`, rule id the
evaluation's name, its score, label and explanation, the evaluated span as evidence), and the
packs' `evaluation` rules that name it give live results that decisions count. Events often
come after the run closed (an evaluator scores the answer once it is given), and sometimes
before: an event whose run is not stored yet waits for it (up to `lookback_seconds`). Records
are followed in the order they were stored (collector/store/follow.py), `batch` at a time and
the next batch at once, so every event of an export is taken however many share its commit;
after a restart the events of the last `lookback_seconds` are looked at again and those that
are results already are skipped.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import orjson
import pyarrow as pa

from collector.clock import Clock, SystemClock
from collector.config.evaluation import JudgesConfig
from collector.evaluation.packs import PackSource, compiled
from collector.evaluation.results import trajectory_result_rows
from collector.judges.metrics import EventMetrics
from collector.judges.plan import applies
from collector.store.database import Database
from collector.store.follow import IN_ORDER, NEW, Follow
from collector.store.reader import Interrupted, Reader, ReadingStage
from collector.store.runs import DuckDBSource, load_trajectories
from collector.store.tables import rows_table
from collector.store.writer import Writer
from collector.ticker import Ticker
from evaluators.base import Result, Severity, Verdict
from evaluators.evaluate import result_of
from evaluators.external import EvaluationRule, ExternalEvaluation, evaluate_event, names
from evaluators.model import Trajectory

EVENT = "gen_ai.evaluation.result"
AT = (
    "make_timestamp((coalesce(nullif(time_unix_nano, 0), observed_time_unix_nano) // 1000)::BIGINT)"
)
# Records stored after the cursor that are (or, from older SDKs that put the event name in an
# attribute, may be) evaluation events: cheap tests first, the JSON is read in Python.
NEW_EVENTS = f"""
SELECT trace_id, span_id, attributes, {AT} AS at, received_at, store_seq FROM logs
WHERE {NEW} AND received_at >= $oldest AND trace_id IS NOT NULL
  AND (event_name = '{EVENT}' OR (event_name IS NULL AND contains(attributes, '{EVENT}')))
{IN_ORDER}
"""
TAKEN = """
SELECT trace_id, rule_id, evaluated_at, evidence_span_ids FROM results
WHERE origin = 'external' AND trace_id IN ?
"""
MAX_PENDING = 10_000  # events waiting for their run; past it the oldest are given up (counted)
Event = tuple[str, str | None, str | None, datetime, datetime]  # trace, span, attrs, at, received
LABEL_VERDICTS = {v.value: v for v in (Verdict.PASS, Verdict.FAIL, Verdict.REVIEW)}


def attributes_of(text: str | None) -> dict[str, Any]:
    try:
        value = orjson.loads(text) if text else {}
    except orjson.JSONDecodeError:
        return {}
    return value if isinstance(value, dict) else {}


def is_evaluation(row: Event) -> bool:
    """An evaluation event with a name: by its event name or, from older SDKs, `event.name`."""
    attrs = attributes_of(row[2])
    named = attrs.get("event.name", EVENT) == EVENT
    return named and attrs.get("gen_ai.evaluation.name") not in (None, "")


def name_of(attributes: str | None) -> str:
    return str(attributes_of(attributes).get("gen_ai.evaluation.name"))


def key_of(trace_id: str, name: str, at: datetime, spans: list[str] | None) -> tuple[Any, ...]:
    """What tells one event's result from another's (as stored: rule id, time, span)."""
    return (trace_id, name, at, tuple(spans or ()))


def event_key(event: Event) -> tuple[Any, ...]:
    trace_id, span_id, attributes, at, _ = event
    return key_of(trace_id, name_of(attributes), at, [span_id] if span_id else None)


def event_of(attributes: str | None, span_id: str | None) -> ExternalEvaluation:
    attrs = attributes_of(attributes)
    score = attrs.get("gen_ai.evaluation.score.value")
    if isinstance(score, bool) or not isinstance(score, int | float):
        score = None
    label = attrs.get("gen_ai.evaluation.score.label")
    explanation = attrs.get("gen_ai.evaluation.explanation")
    return ExternalEvaluation(
        str(attrs["gen_ai.evaluation.name"]),
        None if score is None else float(score),
        None if label is None else str(label),
        None if explanation is None else str(explanation),
        span_id,
    )


def external_row(t: Trajectory, event: ExternalEvaluation, at: datetime) -> dict[str, Any]:
    """The event as it was said: its label as the verdict when it is one, else n/a."""
    verdict = LABEL_VERDICTS.get((event.label or "").lower(), Verdict.NOT_APPLICABLE)
    result = Result(
        pack="external",
        pack_version="",
        rule_id=event.name,
        rule_type="evaluation",
        verdict=verdict,
        severity=Severity.INFO,
        reason="",
        message=event.explanation or "",
        evidence=(event.span_id,) if event.span_id else (),
        score=event.score,
    )
    row = trajectory_result_rows(t, [result], {}, at)[0]
    return {**row, "origin": "external", "pack_version": None, "label": event.label}


class EvaluationEvents(ReadingStage):
    def __init__(
        self,
        config: JudgesConfig,
        database: Database,
        writer: Writer,
        packs: PackSource,
        metrics: EventMetrics,
        clock: Clock | None = None,
    ) -> None:
        self.config = config
        self.metrics = metrics
        self.writer = writer
        self.packs = packs
        self.clock = clock or SystemClock()
        self.reader = Reader(database)
        self.enabled = config.enabled
        self.ticker = Ticker("sextant-evaluations", self._pause, self.tick)
        self.follow = Follow()
        self._behind = False  # the last look filled its batch: look again at once
        self._pending: dict[tuple[Any, ...], Event] = {}

    def consume(self, tables: dict[str, pa.Table], received_at: datetime) -> None:
        """Commit hook (the writer's thread): log records (maybe events) or runs (that events
        may wait for) were stored, so look now rather than at the next tick."""
        if self.enabled and ("logs" in tables or "trajectories" in tables):
            self.ticker.wake()

    def _pause(self) -> float:
        return 0.0 if self._behind else self.config.tick_seconds

    def tick(self) -> int:
        """Turn the new events, and those still waiting for their run, into results; returns
        how many events were taken."""
        now = self.clock.now()
        oldest = now - timedelta(seconds=self.config.lookback_seconds)
        self._behind = False
        try:
            with self.reader.cursor() as cursor:
                scan = self.follow.params(oldest, self.config.batch)
                scanned = cursor.execute(NEW_EVENTS, scan).fetchall()
                new: list[Event] = [row[:5] for row in scanned if is_evaluation(row)]
                # by key: a batch looked at again after a failed write holds waiting events
                keyed = {event_key(e): e for e in [*self._pending.values(), *new]}
                events = list(keyed.values())
                ids = sorted({e[0] for e in events})
                if not ids:
                    self._advance(scanned)
                    return 0
                loaded = load_trajectories(DuckDBSource(cursor, "store"), ids)
                taken = {key_of(*row) for row in cursor.execute(TAKEN, [ids]).fetchall()}
        except Interrupted:
            return 0
        runs = {t.trace_id: t for t in loaded}
        rows: list[dict[str, Any]] = []
        waiting: dict[tuple[Any, ...], Event] = {}
        given_up = 0
        for event in events:
            trace_id, span_id, attributes, at, received_at = event
            key = event_key(event)
            if key in taken:
                continue  # stored before a restart
            t = runs.get(trace_id)
            if t is None:  # its run is not stored yet: look again next time, for a while
                if received_at >= oldest:
                    waiting[key] = event
                else:
                    given_up += 1
                continue
            found = event_of(attributes, span_id)
            rows.append(external_row(t, found, at))
            rows.extend(self._rule_rows(t, found))
        if rows:
            table = rows_table("results", rows)
            self.writer.record({"results": table}, self.ticker.stopping)
        # Only once the results are stored: after a failed write, the events waiting from
        # earlier looks (the cursor is past them) still wait, and this batch is looked at again.
        self._pending = waiting
        self.metrics.unmatched.inc(given_up)
        self._bound_pending()
        self._advance(scanned)
        return len(events)

    def _advance(self, scanned: list[tuple[Any, ...]]) -> None:
        if scanned:
            self.follow.advance(scanned[-1][5])
            self._behind = len(scanned) == self.config.batch

    def _bound_pending(self) -> None:
        while len(self._pending) > MAX_PENDING:
            self._pending.pop(next(iter(self._pending)))
            self.metrics.unmatched.inc()

    def _rule_rows(self, t: Trajectory, event: ExternalEvaluation) -> list[dict[str, Any]]:
        """The live results of the `evaluation` rules that name the event."""
        out: list[dict[str, Any]] = []
        now = self.clock.now()
        for text in self.packs.snapshot():
            pack = compiled(text)
            rules = [
                r
                for r in pack.rules
                if isinstance(r, EvaluationRule) and names(r, event) and applies(pack, r, t)
            ]
            if not rules:
                continue
            results = pack.review.marked(
                t.trace_id,
                pack.name,
                [result_of(pack, None, r, evaluate_event(r, event)) for r in rules],
            )
            out.extend(trajectory_result_rows(t, results, {pack.name: text.sha256}, now))
        return out
