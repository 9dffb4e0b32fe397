"""`sextant show --session ID`: a session as its turns, then what its session rules found."""

from __future__ import annotations

import sys
from typing import Any

from collector.cli.show import abbreviate

TURN_COLUMNS = ["turn", "trace_id", "status", "verdict", "steps", "tool_calls", "input_tokens",
                "output_tokens", "duration_ms", "start_time"]  # fmt: skip


def show_session(spec: Any, session_id: str, format: str, service: str | None = None) -> int:
    from collector.cli._errors import UsageError
    from collector.cli._output import Table, emit
    from collector.store.sessions import AmbiguousSession

    source = spec.open()
    try:
        session = source.session(session_id, service)
    except AmbiguousSession as exc:
        raise UsageError(f"{exc} (--service)") from exc
    finally:
        source.close()
    if session is None:
        print(f"sextant: no session {session_id!r}", file=sys.stderr)
        return 1
    turns = [{"turn": i + 1, **t} for i, t in enumerate(session["turns_detail"])]
    if format == "table":
        print(render(session, turns))
    else:
        emit(Table(turns, TURN_COLUMNS), format, doc=session)
    return 0


def render(s: dict[str, Any], turns: list[dict[str, Any]]) -> str:
    cost = f"${s['cost_usd']:.4f}" if s.get("cost_usd") is not None else "cost unknown"
    lines = [
        f"session {s['session_id']}  {s['status']}"
        + (f"  (service {s['session_service']})" if s.get("session_service") else "")
        + (f" (reopened {s['reopened']}x)" if s.get("reopened") else ""),
        f"target  {s['service_name']} / {s['agent_name']} / {s['service_version']}"
        + (f"  user {s['user_id']}" if s.get("user_id") else ""),
        f"totals  {s['turns']} turns, {s['steps']} steps, {s['tool_calls']} tool calls,"
        f" {s['input_tokens']}→{s['output_tokens']} tokens, {cost}, {s['error_count']} errors",
        f"time    {s['started_at']} → {s['ended_at']}, last turn closed {s['last_turn_at']}",
        f"verdict {s['verdict']}"
        + (f" ({', '.join(s['verdict_rules'])})" if s.get("verdict_rules") else ""),
        "",
    ]
    for t in turns:
        lines.append(
            f"turn {t['turn']:>3}  {t['trace_id']}  {t.get('status') or 'deleted':<10}"
            f" {t.get('verdict') or '':<7} {t.get('steps') or 0:>3} steps"
            f"  {abbreviate(t.get('start_time'), 30)}"
        )
    findings = [r for r in s.get("results", []) if r["verdict"] in ("fail", "review")]
    if findings:
        lines.append("")
    for r in findings:
        traces = ", ".join(r.get("evidence_trace_ids") or [])
        lines.append(
            f"{r['verdict']:<6} {r['pack']}/{r['rule_id']} {r['reason']} (traces {traces}):"
            f" {' '.join((r['message'] or '').split())}"
        )
    return "\n".join(lines)
