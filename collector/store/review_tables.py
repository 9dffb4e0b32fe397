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
