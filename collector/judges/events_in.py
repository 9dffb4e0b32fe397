"""Evaluation events in: `gen_ai.evaluation.result` log records become results.

Each event on a stored run becomes a result of origin `external` (pack `external`, rule id the
evaluation's name, its score, label and explanation, the evaluated span as evidence), and the
packs' `evaluation` rules that name it give live results that decisions count. Events often
come after the run closed (an evaluator scores the answer once it is given), and sometimes
before: each look takes the events of the last `lookback_seconds` whose run is stored and that
are not results yet, so an early event waits for its run and a restart repeats nothing.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import orjson

from collector.clock import Clock, SystemClock
from collector.config.sections import JudgesConfig
from collector.evaluation.packs import compiled
from collector.evaluation.results import trajectory_result_rows
from collector.judges.plan import applies
from collector.judges.stage import PackSource
from collector.replay.load import load_trajectories
from collector.replay.sources import DuckDBSource
from collector.store.database import Database
from collector.store.reader import Interrupted, Reader, ReadingStage
from collector.store.tables import rows_table
from collector.store.writer import Writer
from collector.ticker import Ticker
from evaluators.base import Result, Severity, Verdict
from evaluators.evaluate import result_of
from evaluators.external import EvaluationRule, ExternalEvaluation, evaluate_event, names
from evaluators.model import Trajectory

STORE_TIMEOUT_SECONDS = 30.0
EVENT = "gen_ai.evaluation.result"
ATTRIBUTE = "json_extract_string(l.attributes, '$.\"{}\"')"
NAME = ATTRIBUTE.format("gen_ai.evaluation.name")
AT = (
    "make_timestamp((coalesce(nullif(l.time_unix_nano, 0), l.observed_time_unix_nano)"
    " // 1000)::BIGINT)"
)
NEW_EVENTS = f"""
SELECT l.trace_id, l.span_id, l.attributes, {AT} AS at
FROM logs l
WHERE l.received_at >= $since AND l.trace_id IS NOT NULL AND {NAME} IS NOT NULL
  AND (l.event_name = '{EVENT}' OR {ATTRIBUTE.format("event.name")} = '{EVENT}')
  AND EXISTS (SELECT 1 FROM trajectories t WHERE t.trace_id = l.trace_id AND t.is_current)
  AND NOT EXISTS (
      SELECT 1 FROM results r
      WHERE r.origin = 'external' AND r.trace_id = l.trace_id AND r.rule_id = {NAME}
        AND r.evaluated_at = {AT} AND r.evidence_span_ids IS NOT DISTINCT FROM
            (CASE WHEN l.span_id IS NULL THEN NULL ELSE [l.span_id] END))
ORDER BY l.received_at LIMIT $limit
"""
LABEL_VERDICTS = {v.value: v for v in (Verdict.PASS, Verdict.FAIL, Verdict.REVIEW)}


def event_of(attributes: str | None, span_id: str | None) -> ExternalEvaluation:
    attrs: dict[str, Any] = orjson.loads(attributes) if attributes else {}
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
        clock: Clock | None = None,
    ) -> None:
        self.config = config
        self.writer = writer
        self.packs = packs
        self.clock = clock or SystemClock()
        self.reader = Reader(database)
        self.enabled = config.enabled
        self.ticker = Ticker("sextant-evaluations", config.tick_seconds, self.tick)

    def tick(self) -> int:
        """Turn the new events into results; returns how many events were taken."""
        since = self.clock.now() - timedelta(seconds=self.config.lookback_seconds)
        try:
            with self.reader.cursor() as cursor:
                events = cursor.execute(
                    NEW_EVENTS, {"since": since, "limit": self.config.batch}
                ).fetchall()
                if not events:
                    return 0
                ids = sorted({trace_id for trace_id, *_ in events})
                loaded = load_trajectories(DuckDBSource(cursor, "store"), ids)
        except Interrupted:
            return 0
        runs = {t.trace_id: t for t in loaded}
        rows: list[dict[str, Any]] = []
        for trace_id, span_id, attributes, at in events:
            t = runs.get(trace_id)
            if t is None:
                continue  # retired between the two queries: the next look finds its revision
            event = event_of(attributes, span_id)
            rows.append(external_row(t, event, at))
            rows.extend(self._rule_rows(t, event))
        if rows:
            table = rows_table("results", rows)
            self.writer.submit_tables({"results": table}).result(STORE_TIMEOUT_SECONDS)
        return len(events)

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
            results = [result_of(pack, None, r, evaluate_event(r, event)) for r in rules]
            out.extend(trajectory_result_rows(t, results, {pack.name: text.sha256}, now))
        return out
