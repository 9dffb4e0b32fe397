"""Tables and their Arrow batch types, in one place (collector/store/migrations.py creates them)."""

from __future__ import annotations

import pyarrow as pa

# The payload text of spans, steps and runs (attributes, events, links, prompts, tool arguments
# and results) is compressed with zstd. DuckDB's own choice for strings analyses every segment
# for its dictionary and FSST encodings: 2.4-4.7 µs of CPU a span more on commit and checkpoint,
# and 2.8 times the bytes (docs/performance.md, "Span payloads compressed with zstd"). The
# columns keep their types, so SQL over them is unchanged. DuckDB takes the choice only when a
# table is created: a store created before it keeps DuckDB's own.
PAYLOAD_JSON = "JSON USING COMPRESSION zstd"
PAYLOAD_TEXT = "VARCHAR USING COMPRESSION zstd"

# (column, DuckDB type, Arrow type of the batch column or None when computed in SQL)
# The spans table as schema version 1 created it; later versions add columns at the end.
SPANS_V1 = (
    ("trace_id", "VARCHAR NOT NULL", pa.string()),
    ("span_id", "VARCHAR NOT NULL", pa.string()),
    ("parent_span_id", "VARCHAR", pa.string()),
    ("trace_state", "VARCHAR", pa.string()),
    ("flags", "UINTEGER", pa.uint32()),
    ("name", "VARCHAR", pa.string()),
    ("kind", "VARCHAR", pa.string()),
    ("start_time_unix_nano", "UBIGINT", pa.uint64()),
    ("end_time_unix_nano", "UBIGINT", pa.uint64()),
    ("start_time", "TIMESTAMP", None),
    ("end_time", "TIMESTAMP", None),
    ("duration_ms", "DOUBLE", None),
    ("status_code", "VARCHAR", pa.string()),
    ("status_message", "VARCHAR", pa.string()),
    ("resource_attributes", "JSON", pa.string()),
    ("resource_schema_url", "VARCHAR", pa.string()),
    ("scope_name", "VARCHAR", pa.string()),
    ("scope_version", "VARCHAR", pa.string()),
    ("scope_attributes", "JSON", pa.string()),
    ("scope_schema_url", "VARCHAR", pa.string()),
    ("attributes", PAYLOAD_JSON, pa.string()),
    ("events", PAYLOAD_JSON, pa.string()),
    ("links", PAYLOAD_JSON, pa.string()),
    ("dropped_attributes_count", "UINTEGER", pa.uint32()),
    ("dropped_events_count", "UINTEGER", pa.uint32()),
    ("dropped_links_count", "UINTEGER", pa.uint32()),
    ("truncated_attributes", "VARCHAR[]", pa.list_(pa.string())),
    ("service_name", "VARCHAR", pa.string()),
    ("service_version", "VARCHAR", pa.string()),
    ("step_kind", "VARCHAR", pa.string()),
    ("operation_name", "VARCHAR", pa.string()),
    ("tool_name", "VARCHAR", pa.string()),
    ("tool_call_id", "VARCHAR", pa.string()),
    ("tool_arguments", "JSON", pa.string()),
    ("tool_result", "VARCHAR", pa.string()),
    ("model", "VARCHAR", pa.string()),
    ("input_tokens", "BIGINT", pa.int64()),
    ("output_tokens", "BIGINT", pa.int64()),
    ("agent_name", "VARCHAR", pa.string()),
    ("conversation_id", "VARCHAR", pa.string()),
    ("user_id", "VARCHAR", pa.string()),
    ("error_type", "VARCHAR", pa.string()),
    ("received_at", "TIMESTAMP", None),
)
SPANS = (
    *SPANS_V1,
    # Keys whose values nest too deep to be stored as JSON values: kept as their text.
    ("kept_as_text", "VARCHAR[]", pa.list_(pa.string())),
)

LOGS = (
    ("trace_id", "VARCHAR", pa.string()),
    ("span_id", "VARCHAR", pa.string()),
    ("time_unix_nano", "UBIGINT", pa.uint64()),
    ("observed_time_unix_nano", "UBIGINT", pa.uint64()),
    ("time", "TIMESTAMP", None),
    ("severity_number", "INTEGER", pa.int32()),
    ("severity_text", "VARCHAR", pa.string()),
    ("event_name", "VARCHAR", pa.string()),
    ("body", "JSON", pa.string()),
    ("attributes", "JSON", pa.string()),
    ("flags", "UINTEGER", pa.uint32()),
    ("dropped_attributes_count", "UINTEGER", pa.uint32()),
    ("resource_attributes", "JSON", pa.string()),
    ("scope_name", "VARCHAR", pa.string()),
    ("scope_version", "VARCHAR", pa.string()),
    ("service_name", "VARCHAR", pa.string()),
    ("truncated_attributes", "VARCHAR[]", pa.list_(pa.string())),
    ("received_at", "TIMESTAMP", None),
)

TIMES = (
    ("start_time_unix_nano", "UBIGINT", pa.uint64()),
    ("end_time_unix_nano", "UBIGINT", pa.uint64()),
    ("start_time", "TIMESTAMP", None),
    ("end_time", "TIMESTAMP", None),
    ("duration_ms", "DOUBLE", None),
)

# The trajectories table as schema version 2 created it; later versions add columns at the end.
TRAJECTORIES_V2 = (
    ("trace_id", "VARCHAR NOT NULL", pa.string()),
    ("revision", "INTEGER NOT NULL", pa.int32()),
    ("is_current", "BOOLEAN NOT NULL", pa.bool_()),
    ("status", "VARCHAR", pa.string()),
    ("close_reason", "VARCHAR", pa.string()),
    ("incomplete_reasons", "VARCHAR[]", pa.list_(pa.string())),
    ("agent_run", "BOOLEAN", pa.bool_()),
    ("service_name", "VARCHAR", pa.string()),
    ("agent_name", "VARCHAR", pa.string()),
    ("service_version", "VARCHAR", pa.string()),
    ("root_span_id", "VARCHAR", pa.string()),
    ("root_name", "VARCHAR", pa.string()),
    ("case_id", "VARCHAR", pa.string()),
    ("conversation_id", "VARCHAR", pa.string()),
    ("user_id", "VARCHAR", pa.string()),
    ("input", PAYLOAD_TEXT, pa.string()),
    ("final_output", PAYLOAD_TEXT, pa.string()),
    ("steps", "INTEGER", pa.int32()),
    ("tool_calls", "INTEGER", pa.int32()),
    ("llm_calls", "INTEGER", pa.int32()),
    ("input_tokens", "BIGINT", pa.int64()),
    ("output_tokens", "BIGINT", pa.int64()),
    ("cost_usd", "DOUBLE", pa.float64()),
    ("unpriced_llm_calls", "INTEGER", pa.int32()),
    ("error_count", "INTEGER", pa.int32()),
    ("span_count", "INTEGER", pa.int32()),
    ("late_spans", "INTEGER", pa.int32()),
    *TIMES,
    ("first_received_at", "TIMESTAMP", pa.timestamp("us")),
    ("last_received_at", "TIMESTAMP", pa.timestamp("us")),
    ("closed_at", "TIMESTAMP", pa.timestamp("us")),
)
TRAJECTORIES = (
    *TRAJECTORIES_V2,
    ("verdict", "VARCHAR", pa.string()),
    ("verdict_reasons", "VARCHAR[]", pa.list_(pa.string())),
    # Why the trace could not be built (its trajectory then has no steps), NULL when it was.
    ("build_error", "VARCHAR", pa.string()),
    # {column: decimal text} for totals past their column's range (the column is then NULL).
    ("unrepresentable", "JSON", pa.string()),
    # pack/rule of every live result that failed or reviewed this revision, for the filter
    ("verdict_rules", "VARCHAR[]", pa.list_(pa.string())),
)

STEPS_V2 = (
    ("trace_id", "VARCHAR NOT NULL", pa.string()),
    ("revision", "INTEGER NOT NULL", pa.int32()),
    ("seq", "INTEGER NOT NULL", pa.int32()),
    ("span_id", "VARCHAR", pa.string()),
    ("parent_span_id", "VARCHAR", pa.string()),
    ("depth", "INTEGER", pa.int32()),
    ("kind", "VARCHAR", pa.string()),
    ("span_kind", "VARCHAR", pa.string()),
    ("name", "VARCHAR", pa.string()),
    ("agent_name", "VARCHAR", pa.string()),
    ("tool_name", "VARCHAR", pa.string()),
    ("tool_call_id", "VARCHAR", pa.string()),
    ("arguments", PAYLOAD_JSON, pa.string()),
    ("result", PAYLOAD_TEXT, pa.string()),
    ("status", "VARCHAR", pa.string()),
    ("error_type", "VARCHAR", pa.string()),
    ("model", "VARCHAR", pa.string()),
    ("input_tokens", "BIGINT", pa.int64()),
    ("output_tokens", "BIGINT", pa.int64()),
    ("cost_usd", "DOUBLE", pa.float64()),
    ("approval_status", "VARCHAR", pa.string()),
    ("policy_name", "VARCHAR", pa.string()),
    ("policy_decision", "VARCHAR", pa.string()),
    ("state_target", "VARCHAR", pa.string()),
    *TIMES,
)
# Version 10: MCP facts of a step (collector/assembler/mcp.py), NULL for a step that is not MCP.
STEPS_V10 = (*STEPS_V2, ("mcp", "JSON", pa.string()))
# Version 12: the span id of the model call whose output asked for this tool call, NULL when the
# instrumentation does not say (collector/assembler/build.py, `link_requests`).
STEPS = (*STEPS_V10, ("requested_by", "VARCHAR", pa.string()))

RESULTS_V3 = (
    ("trace_id", "VARCHAR NOT NULL", pa.string()),
    ("revision", "INTEGER NOT NULL", pa.int32()),
    ("pack", "VARCHAR NOT NULL", pa.string()),
    ("pack_version", "VARCHAR", pa.string()),
    ("pack_sha256", "VARCHAR", pa.string()),
    ("rule_id", "VARCHAR NOT NULL", pa.string()),
    ("rule_type", "VARCHAR", pa.string()),
    ("verdict", "VARCHAR", pa.string()),
    ("score", "DOUBLE", pa.float64()),
    ("severity", "VARCHAR", pa.string()),
    ("reason", "VARCHAR", pa.string()),
    ("message", "VARCHAR", pa.string()),
    ("evidence_span_ids", "VARCHAR[]", pa.list_(pa.string())),
    ("requested_decision", "VARCHAR", pa.string()),
    ("service_name", "VARCHAR", pa.string()),
    ("agent_name", "VARCHAR", pa.string()),
    ("service_version", "VARCHAR", pa.string()),
    ("evaluated_at", "TIMESTAMP", pa.timestamp("us")),
)

# Version 4 rebuilt `results` without a primary key so it can hold window results (drift and
# reliability over many trajectories, trace_id NULL) and replay revisions beside live ones.
RESULTS_V4_EXTRA = (
    ("scope", "VARCHAR NOT NULL", pa.string()),  # trajectory | window
    ("origin", "VARCHAR NOT NULL", pa.string()),  # live | replay
    ("replay_id", "VARCHAR", pa.string()),
    ("window_start", "TIMESTAMP", pa.timestamp("us")),
    ("window_end", "TIMESTAMP", pa.timestamp("us")),
    ("baseline", "VARCHAR", pa.string()),
    ("metric", "VARCHAR", pa.string()),
    ("effect_size", "DOUBLE", pa.float64()),
    ("p_value", "DOUBLE", pa.float64()),
    ("baseline_n", "INTEGER", pa.int32()),
    ("current_n", "INTEGER", pa.int32()),
    ("evidence_trace_ids", "VARCHAR[]", pa.list_(pa.string())),
)
RESULTS_V4 = (
    ("trace_id", "VARCHAR", pa.string()),
    *RESULTS_V3[1:],
    *RESULTS_V4_EXTRA,
)
# Version 9: a judgement's or an external evaluation's label (score alone is not the verdict).
RESULTS_V9 = (*RESULTS_V4, ("label", "VARCHAR", pa.string()))
# Version 10: the session a `scope: session` result is about (its trace is the turn it names).
RESULTS_V10 = (*RESULTS_V9, ("session_id", "VARCHAR", pa.string()))
# Version 15: what a window result was decided on (both sides' values, raw and adjusted p-values,
# the tools that moved), as JSON (collector/drift/details.py).
RESULTS_V15 = (*RESULTS_V10, ("details", "JSON", pa.string()))
# Version 16: who gave a result: NULL for the rule's own evaluator, 'human' for a reviewer's label
# (the reviewer's name beside it); a human label answers the result with its trace, pack and rule.
RESULTS_V16 = (
    *RESULTS_V15,
    ("source", "VARCHAR", pa.string()),
    ("reviewer", "VARCHAR", pa.string()),
)
# Version 20: a live pass or fail that its pack's `review.audit` sampled for a person to check
# (an audit item in the owner's review queue until a label answers it); NULL otherwise.
RESULTS = (*RESULTS_V16, ("audit", "BOOLEAN", pa.bool_()))

# One row per session (conversation of many runs), replaced whenever a turn arrives or it
# closes: what `GET /api/v1/sessions` lists. The turns are its traces, in the order they arrived.
SESSIONS_V10 = (
    ("session_id", "VARCHAR NOT NULL", pa.string()),
    ("status", "VARCHAR NOT NULL", pa.string()),  # open | closed
    ("service_name", "VARCHAR", pa.string()),  # of the latest turn
    ("agent_name", "VARCHAR", pa.string()),
    ("service_version", "VARCHAR", pa.string()),
    ("user_id", "VARCHAR", pa.string()),
    ("turns", "INTEGER NOT NULL", pa.int32()),
    ("trace_ids", "VARCHAR[]", pa.list_(pa.string())),
    ("started_at", "TIMESTAMP", pa.timestamp("us")),
    ("ended_at", "TIMESTAMP", pa.timestamp("us")),
    ("steps", "INTEGER", pa.int32()),
    ("tool_calls", "INTEGER", pa.int32()),
    ("llm_calls", "INTEGER", pa.int32()),
    ("input_tokens", "BIGINT", pa.int64()),
    ("output_tokens", "BIGINT", pa.int64()),
    ("cost_usd", "DOUBLE", pa.float64()),
    ("error_count", "INTEGER", pa.int32()),
    ("verdict", "VARCHAR", pa.string()),  # of its session rules: pass | fail | review | none
    ("verdict_rules", "VARCHAR[]", pa.list_(pa.string())),  # pack/rule failing or reviewing
    ("reopened", "INTEGER NOT NULL", pa.int32()),  # times a late turn reopened it
    ("last_turn_at", "TIMESTAMP NOT NULL", pa.timestamp("us")),  # when its last turn closed
    ("closed_at", "TIMESTAMP", pa.timestamp("us")),
)
# Version 14: a session is one service's conversation; its key is (session_id, session_service),
# session_service being every turn's service.name, or '*' for a conversation grouped across
# services (`sessions.across_services`).
SESSIONS = (*SESSIONS_V10, ("session_service", "VARCHAR", pa.string()))

# Version 13: the MCP inventory, one row per MCP server a service's runs reached: the tools it
# was seen to offer (called or listed). A service's rows are replaced together whenever one of
# them changes (collector/evaluation/mcp.py), so what is stored is what the inventory holds.
MCP_SERVERS = (
    ("service_name", "VARCHAR NOT NULL", pa.string()),  # of the runs (client side)
    ("server", "VARCHAR NOT NULL", pa.string()),
    ("tools", "VARCHAR[] NOT NULL", pa.list_(pa.string())),
    ("first_seen", "TIMESTAMP NOT NULL", pa.timestamp("us")),
    ("last_seen", "TIMESTAMP NOT NULL", pa.timestamp("us")),
)

# One row per transition of a decision (a history, never updated): pending, firing, resolved,
# and the people who acknowledged or resolved it.
DECISIONS_V4 = (
    ("decision_id", "VARCHAR NOT NULL", pa.string()),
    ("seq", "INTEGER NOT NULL", pa.int32()),
    ("event", "VARCHAR NOT NULL", pa.string()),  # pending|firing|resolved|updated|ack|resolve
    ("state", "VARCHAR NOT NULL", pa.string()),  # pending|firing|resolved
    ("decision", "VARCHAR NOT NULL", pa.string()),  # PASS ... DISABLE
    ("service_name", "VARCHAR", pa.string()),
    ("agent_name", "VARCHAR", pa.string()),
    ("service_version", "VARCHAR", pa.string()),
    ("policy", "VARCHAR", pa.string()),
    ("reasons", "VARCHAR[]", pa.list_(pa.string())),
    ("owner", "VARCHAR", pa.string()),
    ("rules", "VARCHAR[]", pa.list_(pa.string())),
    ("packs", "VARCHAR[]", pa.list_(pa.string())),  # name@version
    ("evidence_trace_ids", "VARCHAR[]", pa.list_(pa.string())),
    ("summary", "VARCHAR", pa.string()),
    ("active_at", "TIMESTAMP", pa.timestamp("us")),
    ("fired_at", "TIMESTAMP", pa.timestamp("us")),
    ("resolved_at", "TIMESTAMP", pa.timestamp("us")),
    ("actor", "VARCHAR", pa.string()),
    ("note", "VARCHAR", pa.string()),
    ("changed_at", "TIMESTAMP NOT NULL", pa.timestamp("us")),
)
# Version 19: a recertification's outcome (dataset, packs, result, cases still failing) as JSON,
# on the `recertify` rows of a decision resolved on a dataset's replay.
DECISIONS = (*DECISIONS_V4, ("recertification", "JSON", pa.string()))

# One row per delivery attempt of an alert to a channel (Alertmanager, webhook).
ALERTS = (
    ("decision_id", "VARCHAR", pa.string()),
    ("channel", "VARCHAR NOT NULL", pa.string()),
    ("kind", "VARCHAR NOT NULL", pa.string()),  # alertmanager | webhook
    ("status", "VARCHAR NOT NULL", pa.string()),  # firing | resolved | test
    ("dedup_key", "VARCHAR", pa.string()),
    ("attempt", "INTEGER", pa.int32()),
    ("ok", "BOOLEAN", pa.bool_()),
    ("http_status", "INTEGER", pa.int32()),
    ("error", "VARCHAR", pa.string()),
    ("sent_at", "TIMESTAMP NOT NULL", pa.timestamp("us")),
)

# Frozen baselines for drift rules (`sextant baseline save NAME`): the definition, and the exact
# trajectory revisions it holds, so later runs or rebuilt revisions never change it.
BASELINES = (
    ("name", "VARCHAR NOT NULL", pa.string()),
    ("service_name", "VARCHAR", pa.string()),  # globs, NULL = any
    ("agent_name", "VARCHAR", pa.string()),
    ("service_version", "VARCHAR", pa.string()),
    ("since", "TIMESTAMP", pa.timestamp("us")),  # end_time bounds of the runs it holds
    ("until", "TIMESTAMP", pa.timestamp("us")),
    ("runs", "INTEGER", pa.int32()),
    ("created_at", "TIMESTAMP NOT NULL", pa.timestamp("us")),
)
BASELINE_MEMBERS = (
    ("name", "VARCHAR NOT NULL", pa.string()),
    ("trace_id", "VARCHAR NOT NULL", pa.string()),
    ("revision", "INTEGER NOT NULL", pa.int32()),
)

RULE_PACKS = (
    ("name", "VARCHAR NOT NULL", pa.string()),
    ("version", "VARCHAR", pa.string()),
    ("sha256", "VARCHAR NOT NULL", pa.string()),
    ("owner", "VARCHAR", pa.string()),
    ("source", "VARCHAR", pa.string()),
    ("rules", "INTEGER", pa.int32()),
    ("text", "VARCHAR", pa.string()),
    ("loaded_at", "TIMESTAMP", pa.timestamp("us")),
)

# SQL for the columns computed from the batch while inserting (vectorized in DuckDB).
COMPUTED = {
    "start_time": "make_timestamp((start_time_unix_nano // 1000)::BIGINT)",
    "end_time": "make_timestamp((end_time_unix_nano // 1000)::BIGINT)",
    "duration_ms": "(end_time_unix_nano::HUGEINT - start_time_unix_nano::HUGEINT) / 1e6",
    "time": "make_timestamp((coalesce(nullif(time_unix_nano, 0), observed_time_unix_nano)"
    " // 1000)::BIGINT)",
    "received_at": "$received_at",
}


def arrow_schema(table: tuple[tuple[str, str, pa.DataType | None], ...]) -> pa.Schema:
    return pa.schema([(name, typ) for name, _, typ in table if typ is not None])


def batch_columns(table: tuple[tuple[str, str, pa.DataType | None], ...]) -> tuple[str, ...]:
    """The columns a batch carries (those with an Arrow type), in table order."""
    return tuple(name for name, _, typ in table if typ is not None)


def create_table(name: str, table: tuple[tuple[str, str, pa.DataType | None], ...]) -> str:
    columns = ",\n  ".join(f"{col} {sql_type}" for col, sql_type, _ in table)
    return f"CREATE TABLE IF NOT EXISTS {name} (\n  {columns}\n)"


def with_key(name: str, table: tuple[tuple[str, str, pa.DataType | None], ...], key: str) -> str:
    return create_table(name, table)[:-2] + f",\n  PRIMARY KEY ({key})\n)"


# The tables stages follow (collector/store/follow.py): each row gets the next number of one
# sequence as it is inserted, `store_seq`, the last column. Each table is written by one lane
# of the writer (`logs` by the loads, `trajectories` by the stages' writes), which inserts and
# commits one transaction at a time, so a row committed later always has a larger number than
# the table's rows before it, whatever its timestamps: a follower that read up to N has read
# every row of its table numbered N or less.
FOLLOWED = ("logs", "trajectories")
STORE_SEQ = "nextval('store_seq')"


def insert_select(
    name: str, table: tuple[tuple[str, str, pa.DataType | None], ...], or_ignore: bool = False
) -> str:
    """INSERT ... SELECT from a registered Arrow batch named `batch`."""
    exprs = ", ".join(col if typ is not None else COMPUTED[col] for col, _, typ in table)
    if name in FOLLOWED:
        exprs += f", {STORE_SEQ}"
    verb = "INSERT OR IGNORE" if or_ignore else "INSERT"
    return f"{verb} INTO {name} SELECT {exprs} FROM batch"
