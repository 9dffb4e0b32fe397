"""A store on disk filled with hand-written runs, for the drift and reliability queries."""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path

from collector.store.database import Database

NOW = datetime(2025, 6, 1, 12, 0)


class RunStore:
    """A migrated DuckDB store; `run` adds one closed trajectory with its tool steps."""

    def __init__(self, path: Path) -> None:
        self.database = Database(path)
        self.database.open()
        self.cursor = self.database.cursor()
        self.added = 0

    def run(
        self,
        tools: list[str] | tuple[str, ...] = (),
        *,
        service: str = "travel-desk",
        agent: str = "travel-agent",
        version: str | None = "1.4.0",
        case: str | None = None,
        ago: timedelta = timedelta(minutes=1),
        verdict: str | None = "pass",
        status: str = "ok",
        steps: int | None = None,
        duration_ms: float = 1000.0,
        errors: int = 0,
        revision: int = 1,
        current: bool = True,
        agent_run: bool = True,
        trace_id: str | None = None,
    ) -> str:
        """Add a run that ended `ago` before NOW and called `tools` in order; its trace id."""
        self.added += 1
        trace_id = trace_id or f"{self.added:032x}"
        self.cursor.execute(
            "INSERT INTO trajectories (trace_id, revision, is_current, status, agent_run,"
            " service_name, agent_name, service_version, case_id, steps, tool_calls, end_time,"
            " duration_ms, error_count, verdict) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?,"
            " ?, ?)",
            [
                trace_id,
                revision,
                current,
                status,
                agent_run,
                service,
                agent,
                version,
                case,
                len(tools) + 1 if steps is None else steps,
                len(tools),
                NOW - ago,
                duration_ms,
                errors,
                verdict,
            ],
        )
        for seq, tool in enumerate(tools, start=1):
            self.cursor.execute(
                "INSERT INTO steps (trace_id, revision, seq, kind, span_kind, name, tool_name)"
                " VALUES (?, ?, ?, 'tool', 'tool', ?, ?)",
                [trace_id, revision, seq, tool, tool],
            )
        return trace_id

    def result(
        self, trace_id: str, rule: str, verdict: str, revision: int = 1, reviewer: str = ""
    ) -> None:
        """A live per-run result of `rule` (pack/rule id) for this run; with `reviewer`, that
        person's label of it."""
        pack, rule_id = rule.split("/", 1)
        self.cursor.execute(
            "INSERT INTO results (trace_id, revision, pack, rule_id, verdict, scope, origin,"
            " source, reviewer) VALUES (?, ?, ?, ?, ?, 'trajectory', 'live', ?, ?)",
            [trace_id, revision, pack, rule_id, verdict, "human" if reviewer else None,
             reviewer or None],
        )  # fmt: skip

    def snapshot(self, name: str, trace_ids: list[str], revision: int = 1) -> None:
        """Freeze these runs (at `revision`) as the saved baseline `name`."""
        for trace_id in trace_ids:
            self.cursor.execute(
                "INSERT INTO baseline_members (name, trace_id, revision) VALUES (?, ?, ?)",
                [name, trace_id, revision],
            )

    def close(self) -> None:
        self.database.close()
