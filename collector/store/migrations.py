"""The migrations that create and change the store's tables: each moves version N-1 to N."""

from __future__ import annotations

from collector.store.dataset_tables import DATASET_CASES
from collector.store.judge_tables import CARD_LABELS, EVALUATOR_CARDS_V9, JUDGE_CALLS
from collector.store.review_tables import REVIEW_CLAIMS
from collector.store.schema import (
    ALERTS,
    BASELINE_MEMBERS,
    BASELINES,
    DECISIONS_V4,
    LOGS,
    MCP_SERVERS,
    RESULTS_V3,
    RESULTS_V4,
    RULE_PACKS,
    SESSIONS_V10,
    SPANS_V1,
    STEPS_V2,
    TRAJECTORIES_V2,
    create_table,
    with_key,
)

SCHEMA_VERSION = 20

# Each migration moves the store from version N-1 to N; they run in order inside one transaction.
MIGRATIONS: dict[int, list[str]] = {
    1: [
        "CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL,"
        " applied_at TIMESTAMP NOT NULL DEFAULT current_timestamp)",
        # No key: the writer drops a re-sent span itself (collector/store/span_keys.py). A
        # store made before keeps its key; DuckDB cannot drop one.
        create_table("spans", SPANS_V1),
        create_table("logs", LOGS),
    ],
    2: [
        with_key("trajectories", TRAJECTORIES_V2, "trace_id, revision"),
        # No key: its index held 35-40 bytes of memory for every step stored; a round stored
        # twice is caught by its trajectory's key (collector/store/tables.py). A store made
        # before keeps it.
        create_table("steps", STEPS_V2),
        # Lookups by trace (`trace_id IN ?`) use this index instead of scanning the table.
        "CREATE INDEX trajectories_trace_id ON trajectories (trace_id)",
    ],
    3: [
        with_key("results", RESULTS_V3, "trace_id, revision, pack, rule_id"),
        create_table("rule_packs", RULE_PACKS),
        "ALTER TABLE trajectories ADD COLUMN verdict VARCHAR",
        "ALTER TABLE trajectories ADD COLUMN verdict_reasons VARCHAR[]",
    ],
    4: [
        create_table("results_v4", RESULTS_V4),
        "INSERT INTO results_v4 SELECT *, 'trajectory', 'live', NULL, NULL, NULL, NULL, NULL,"
        " NULL, NULL, NULL, NULL, NULL FROM results",
        "DROP TABLE results",
        "ALTER TABLE results_v4 RENAME TO results",
        "CREATE INDEX results_trace_id ON results (trace_id)",
        with_key("decisions", DECISIONS_V4, "decision_id, seq"),
        create_table("alerts", ALERTS),
    ],
    5: [
        with_key("baselines", BASELINES, "name"),
        with_key("baseline_members", BASELINE_MEMBERS, "name, trace_id, revision"),
    ],
    6: [
        "ALTER TABLE spans ADD COLUMN kept_as_text VARCHAR[]",
        "ALTER TABLE trajectories ADD COLUMN build_error VARCHAR",
        "ALTER TABLE trajectories ADD COLUMN unrepresentable JSON",
    ],
    7: [
        "ALTER TABLE trajectories ADD COLUMN verdict_rules VARCHAR[]",
        # the runs stored before: from their live results, once
        "UPDATE trajectories SET verdict_rules = r.rules FROM ("
        " SELECT trace_id, revision, list_sort(list(DISTINCT pack || '/' || rule_id)) AS rules"
        " FROM results WHERE scope = 'trajectory' AND origin = 'live'"
        " AND verdict IN ('fail', 'review') GROUP BY ALL) r"
        " WHERE trajectories.trace_id = r.trace_id AND trajectories.revision = r.revision",
    ],
    8: [
        # the last ingest journal frame loaded, written in the transaction that loads it
        "CREATE TABLE journal_state (applied_seq UBIGINT NOT NULL)",
        "INSERT INTO journal_state VALUES (0)",
    ],
    9: [
        "ALTER TABLE results ADD COLUMN label VARCHAR",
        create_table("judge_calls", JUDGE_CALLS),
        create_table("evaluator_cards", EVALUATOR_CARDS_V9),
    ],
    10: [
        "ALTER TABLE results ADD COLUMN session_id VARCHAR",
        "ALTER TABLE steps ADD COLUMN mcp JSON",
        # No key: a session's row is replaced (deleted, then inserted) in one transaction.
        create_table("sessions", SESSIONS_V10),
        "CREATE INDEX sessions_session_id ON sessions (session_id)",
    ],
    11: [
        # The order rows were stored in, for the stages that follow logs and trajectories:
        # timestamps are shared by a whole commit and runs close out of order.
        "CREATE SEQUENCE store_seq",
        "ALTER TABLE logs ADD COLUMN store_seq BIGINT",
        "UPDATE logs SET store_seq = nextval('store_seq')",
        "ALTER TABLE trajectories ADD COLUMN store_seq BIGINT",
        "UPDATE trajectories SET store_seq = nextval('store_seq')",
    ],
    12: [
        # which model call asked for each tool call: causal order for `precedes` and sessions
        "ALTER TABLE steps ADD COLUMN requested_by VARCHAR",
    ],
    13: [
        create_table("mcp_servers", MCP_SERVERS),
    ],
    14: [
        "ALTER TABLE sessions ADD COLUMN session_service VARCHAR",
        # a session stored before was keyed by its id alone: it keeps its latest turn's service
        "UPDATE sessions SET session_service = coalesce(service_name, '')",
    ],
    15: [
        "ALTER TABLE results ADD COLUMN details JSON",
    ],
    16: [
        "ALTER TABLE results ADD COLUMN source VARCHAR",
        "ALTER TABLE results ADD COLUMN reviewer VARCHAR",
    ],
    17: [
        # who reviews which REVIEW result now (collector/review/claims.py)
        with_key("review_claims", REVIEW_CLAIMS, "trace_id, pack, rule_id"),
    ],
    18: [
        "ALTER TABLE evaluator_cards ADD COLUMN card_id VARCHAR",
        "ALTER TABLE evaluator_cards ADD COLUMN source VARCHAR",
        "ALTER TABLE evaluator_cards ADD COLUMN not_applicable INTEGER",
        "ALTER TABLE evaluator_cards ADD COLUMN reused_labels INTEGER",
        # the cards stored before were calibrated on cases files
        "UPDATE evaluator_cards SET card_id = replace(uuid()::VARCHAR, '-', ''), source = 'cases'",
        create_table("card_labels", CARD_LABELS),
        "CREATE INDEX card_labels_rule ON card_labels (pack, rule_id)",
    ],
    19: [
        # named datasets of runs kept as cases; a decision's recertification on one
        create_table("dataset_cases", DATASET_CASES),
        "CREATE INDEX dataset_cases_dataset ON dataset_cases (dataset)",
        "ALTER TABLE decisions ADD COLUMN recertification JSON",
    ],
    20: [
        # a pass or fail sampled for audit by its pack's review.audit (collector/review/queue.py)
        "ALTER TABLE results ADD COLUMN audit BOOLEAN",
    ],
}
