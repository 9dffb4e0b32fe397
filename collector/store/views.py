"""Views that answer an SRE's common questions in one line, recreated each time the store opens."""

from __future__ import annotations

import duckdb

from collector.store.review_tables import IN_FORCE

# Views are not migrations: their SQL follows the code, so each start replaces them.
VIEWS = {
    # Every tool call of the current trajectories, with its arguments and result.
    "tool_calls": """
        SELECT s.trace_id, t.service_name, t.agent_name, t.service_version, s.seq, s.span_id,
               s.tool_name, s.tool_call_id, s.arguments, s.result, s.status, s.error_type,
               s.start_time, s.duration_ms
        FROM steps s JOIN trajectories t USING (trace_id, revision)
        WHERE t.is_current AND s.kind = 'tool'""",
    # What failed or needs review, and why: the live results of the current trajectories and
    # every window result (a reviewer's fail among them; a review a reviewer answered not).
    "failures": f"""
        SELECT r.trace_id, r.service_name, r.agent_name, r.service_version, r.pack,
               r.pack_version, r.rule_id, r.rule_type, r.verdict, r.severity, r.reason, r.message,
               r.requested_decision, r.evidence_span_ids, r.scope, r.evaluated_at
        FROM results r LEFT JOIN trajectories t
             ON t.trace_id = r.trace_id AND t.revision = r.revision
        WHERE r.origin = 'live' AND r.verdict IN ('fail', 'review')
              AND (r.scope = 'window' OR t.is_current) AND {IN_FORCE}""",
    # A decision's state now: the last of its transitions.
    "current_decisions": """
        SELECT * FROM decisions
        QUALIFY row_number() OVER (PARTITION BY decision_id ORDER BY seq DESC) = 1""",
    "slowest_runs": """
        SELECT trace_id, service_name, agent_name, service_version, verdict, status,
               duration_ms, steps, tool_calls, llm_calls, cost_usd, start_time
        FROM trajectories WHERE is_current AND agent_run
        ORDER BY duration_ms DESC NULLS LAST""",
    "costliest_runs": """
        SELECT trace_id, service_name, agent_name, service_version, verdict, status,
               cost_usd, input_tokens, output_tokens, llm_calls, unpriced_llm_calls,
               duration_ms, start_time
        FROM trajectories WHERE is_current AND agent_run AND cost_usd IS NOT NULL
        ORDER BY cost_usd DESC""",
}


def create_views(con: duckdb.DuckDBPyConnection) -> None:
    for name, sql in VIEWS.items():
        con.execute(f"CREATE OR REPLACE VIEW {name} AS {sql}")
