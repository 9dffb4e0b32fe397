"""Columns of named datasets: runs kept as regression cases, with what a pack must say of them."""

from __future__ import annotations

import pyarrow as pa

# One row each time a run is added to a dataset (a history, never updated): the latest row of a
# (dataset, trace_id) is the case. The run is kept whole, as `sextant rules test` cases hold it,
# so a case outlives retention and a rebuilt revision of its trace.
DATASET_CASES = (
    ("dataset", "VARCHAR NOT NULL", pa.string()),
    ("trace_id", "VARCHAR NOT NULL", pa.string()),
    ("revision", "INTEGER NOT NULL", pa.int32()),
    ("service_name", "VARCHAR", pa.string()),
    ("agent_name", "VARCHAR", pa.string()),
    ("service_version", "VARCHAR", pa.string()),
    # the trajectory document (GET /api/v1/trajectories/{id}) with its live results
    ("trajectory", "JSON NOT NULL", pa.string()),
    # the pack verdict it must get: pass | fail; NULL = as labelled, else as it was judged live
    ("expect", "VARCHAR", pa.string()),
    # the reviewers' labels on the run when it was added: [{pack, rule_id, verdict, ...}]
    ("labels", "JSON", pa.string()),
    ("added_by", "VARCHAR NOT NULL", pa.string()),
    ("added_at", "TIMESTAMP NOT NULL", pa.timestamp("us")),
    ("note", "VARCHAR", pa.string()),
)
