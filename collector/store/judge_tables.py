"""Columns of the judges' tables: each call to a judge, and the EvaluatorCards that certify one."""

from __future__ import annotations

import pyarrow as pa

# One row per judge call (or cache hit, or call not made): what it cost, how long it took and
# what came back, for the SREs who pay for judges and the people who certify them.
JUDGE_CALLS = (
    ("trace_id", "VARCHAR NOT NULL", pa.string()),
    ("revision", "INTEGER NOT NULL", pa.int32()),
    ("pack", "VARCHAR NOT NULL", pa.string()),
    ("pack_version", "VARCHAR", pa.string()),
    ("rule_id", "VARCHAR NOT NULL", pa.string()),
    ("model", "VARCHAR", pa.string()),
    ("prompt_sha256", "VARCHAR", pa.string()),
    ("outcome", "VARCHAR NOT NULL", pa.string()),  # ok|cached|timeout|rate_limited|error|...
    ("input_tokens", "BIGINT", pa.int64()),
    ("output_tokens", "BIGINT", pa.int64()),
    ("cost_usd", "DOUBLE", pa.float64()),
    ("latency_seconds", "DOUBLE", pa.float64()),
    ("score", "DOUBLE", pa.float64()),
    ("label", "VARCHAR", pa.string()),
    ("explanation", "VARCHAR", pa.string()),
    ("error", "VARCHAR", pa.string()),
    ("called_at", "TIMESTAMP NOT NULL", pa.timestamp("us")),
)
# An EvaluatorCard: a judge's agreement with human labels, for one pack version, model and
# prompt. A judge may ask for more than REVIEW only with a card meeting the pack's bounds.
# The table as schema version 9 created it; version 18 adds columns at the end.
EVALUATOR_CARDS_V9 = (
    ("pack", "VARCHAR NOT NULL", pa.string()),
    ("pack_version", "VARCHAR NOT NULL", pa.string()),
    ("rule_id", "VARCHAR NOT NULL", pa.string()),
    ("model", "VARCHAR NOT NULL", pa.string()),
    ("template_sha256", "VARCHAR NOT NULL", pa.string()),  # the prompt template, not a run's
    ("cases", "INTEGER NOT NULL", pa.int32()),
    ("cases_sha256", "VARCHAR", pa.string()),
    ("positives", "INTEGER NOT NULL", pa.int32()),
    ("negatives", "INTEGER NOT NULL", pa.int32()),
    ("unjudged", "INTEGER NOT NULL", pa.int32()),
    ("agreement", "DOUBLE", pa.float64()),
    ("tpr", "DOUBLE", pa.float64()),
    ("tnr", "DOUBLE", pa.float64()),
    ("tpr_lower", "DOUBLE", pa.float64()),
    ("tnr_lower", "DOUBLE", pa.float64()),
    ("calibrated_at", "TIMESTAMP NOT NULL", pa.timestamp("us")),
)
# Version 18: a card's id (what `card_labels` names), where its labels came from (`cases`: a
# JSONL file; `reviews`: reviewers' labels in `results`), the labels left out as not applicable,
# and how many of its labels an earlier card had used already (NULL for `cases`).
EVALUATOR_CARDS = (
    *EVALUATOR_CARDS_V9,
    ("card_id", "VARCHAR", pa.string()),
    ("source", "VARCHAR", pa.string()),  # cases | reviews
    ("not_applicable", "INTEGER", pa.int32()),
    ("reused_labels", "INTEGER", pa.int32()),
)
# Version 18: the reviewers' labels a `reviews` card was calibrated on, one row per run, so that
# the next card of the rule is calibrated on runs no card has seen (a single-use gold set).
CARD_LABELS = (
    ("card_id", "VARCHAR NOT NULL", pa.string()),
    ("pack", "VARCHAR NOT NULL", pa.string()),
    ("rule_id", "VARCHAR NOT NULL", pa.string()),
    ("trace_id", "VARCHAR NOT NULL", pa.string()),
    ("revision", "INTEGER NOT NULL", pa.int32()),
    ("reviewer", "VARCHAR", pa.string()),
    ("labelled_at", "TIMESTAMP", pa.timestamp("us")),
    ("fails", "BOOLEAN NOT NULL", pa.bool_()),  # people failed the run (a positive)
    ("flagged", "BOOLEAN NOT NULL", pa.bool_()),  # the judge failed it
    ("reused", "BOOLEAN NOT NULL", pa.bool_()),  # an earlier card had used this run
)
