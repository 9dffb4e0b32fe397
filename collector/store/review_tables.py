"""Columns of the review desk's table: who holds which review item, until when."""

from __future__ import annotations

import pyarrow as pa

# The latest claim of each review item (a live REVIEW result: trace, pack, rule), replaced by
# the next (collector/store/tables.py). A claim ends at `expires_at`; releasing one (a label, a
# skip) stores it again with `expires_at` set to the moment it was let go.
REVIEW_CLAIMS = (
    ("trace_id", "VARCHAR NOT NULL", pa.string()),
    ("pack", "VARCHAR NOT NULL", pa.string()),
    ("rule_id", "VARCHAR NOT NULL", pa.string()),
    ("reviewer", "VARCHAR NOT NULL", pa.string()),
    ("claimed_at", "TIMESTAMP NOT NULL", pa.timestamp("us")),
    ("expires_at", "TIMESTAMP NOT NULL", pa.timestamp("us")),
)

# Whether a person answered the result `r`: a label (a live result with source 'human') of its
# trace, pack and rule, at its revision or a later one. The latest label of an item wins.
ANSWERED = """
EXISTS (SELECT 1 FROM results h
        WHERE h.source = 'human' AND h.origin = 'live' AND h.scope = 'trajectory'
          AND h.trace_id = r.trace_id AND h.pack = r.pack AND h.rule_id = r.rule_id
          AND h.revision >= r.revision)
"""
# A label `r` that a later one of the same item replaced (the latest label wins).
SUPERSEDED = """
EXISTS (SELECT 1 FROM results l
        WHERE l.source = 'human' AND l.origin = 'live' AND l.scope = 'trajectory'
          AND l.trace_id = r.trace_id AND l.pack = r.pack AND l.rule_id = r.rule_id
          AND (l.revision, l.evaluated_at) > (r.revision, r.evaluated_at))
"""
# What still counts of the results `r`: not a REVIEW that a person answered (the label speaks
# now), not a label that a later label replaced.
IN_FORCE = (
    f"NOT (r.verdict = 'review' AND r.source IS NULL AND {ANSWERED})"
    f" AND NOT (r.source IS NOT DISTINCT FROM 'human' AND {SUPERSEDED})"
)
