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
EVALUATOR_CARDS = (
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
