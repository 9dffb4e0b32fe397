"""`sextant show`: one stored trajectory as a numbered tree, its findings pointing at the steps."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from collector.cli._cluster import add_cluster
from collector.cli._flags import add_command, add_format, add_source, positive_int

ARGUMENT_WIDTH = 60
STEP_COLUMNS = ["seq", "depth", "kind", "name", "status", "error_type", "duration_ms",
                "input_tokens", "output_tokens", "arguments", "span_id"]  # fmt: skip


def register(sub: Any) -> None:
    show = add_command(
        sub,
        "show",
        "print a trajectory as a tree of numbered steps, or a session as its turns",
        "sextant show --latest --url http://localhost:9464",
    )
    show.add_argument("trace_id", nargs="?", help="32 hex digits")
    show.add_argument("--latest", action="store_true", help="the most recently closed trajectory")
    show.add_argument("--session", metavar="ID", help="a session: its turns and session results")
    show.add_argument(
        "--service", help="with --session: the service whose session (when several use the id)"
    )
    show.add_argument("--revision", type=positive_int, help="a past revision (default: current)")
    add_source(show)
    add_cluster(show)
    add_format(show, json_alias=True)
    show.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from collector.cli._errors import UsageError
    from collector.cli._output import Table, emit
    from collector.cli._source import SourceSpec

    if sum((args.trace_id is not None, args.latest, args.session is not None)) != 1:
        raise UsageError("give a TRACE_ID, --latest or --session ID (one of them)")
    if args.service is not None and args.session is None:
        raise UsageError("--service names a session's service: give --session ID too")
    if args.session is not None:
        from collector.cli.show_session import show_session

        return show_session(SourceSpec.of(args), args.session, args.format, args.service)
    if args.cluster is not None:
        trajectory = fetch_in_cluster(args)
    else:
        source = SourceSpec.of(args).open()
        try:
            trajectory = fetch(source, args.trace_id, args.revision)
        finally:
            source.close()
    if trajectory is None:
        print(f"sextant: no trajectory for trace {args.trace_id or '(latest)'}", file=sys.stderr)
        return 1
    if args.format == "table":
        print(render(trajectory))
    else:
        emit(Table(trajectory["steps_detail"], STEP_COLUMNS), args.format, doc=trajectory)
    return 0


def fetch(source: Any, trace_id: str | None, revision: int | None) -> dict[str, Any] | None:
    """The trajectory asked for; without an id, the most recently closed one."""
    if trace_id is None:
        from collector.store.listing import page_query

        sql, params = page_query({}, 1)
        latest = source.query(sql, params).to_pylist()
        if not latest:
            return None
        trace_id = latest[0]["trace_id"]
    return source.trajectory(trace_id, revision)


def fetch_in_cluster(args: argparse.Namespace) -> dict[str, Any] | None:
    """The trajectory from whichever replica has it (a trace lands whole on one)."""
    from collector.cli._cluster import ask_all
    from collector.cli._errors import UsageError
    from collector.cli._source import LiveSource

    if args.trace_id is None:
        raise UsageError("--cluster needs a TRACE_ID (--latest is per replica)")
    answers, _ = ask_all(args, lambda c: LiveSource(c).trajectory(args.trace_id, args.revision))
    found = [(replica, t) for replica, t in answers if t is not None]
    if not found:
        return None
    replica, trajectory = found[0]
    return {**trajectory, "replica": replica}


def abbreviate(value: Any, width: int = ARGUMENT_WIDTH) -> str:
    """One line of at most `width` characters, for the tree's columns."""
    import orjson

    if value is None:
        return ""
    text = value if isinstance(value, str) else orjson.dumps(value).decode()
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


def tokens(step: dict[str, Any]) -> str:
    if step.get("input_tokens") is None and step.get("output_tokens") is None:
        return ""
    return f"{step.get('input_tokens') or 0}→{step.get('output_tokens') or 0} tok"


def header(t: dict[str, Any]) -> list[str]:
    cost = f"${t['cost_usd']:.4f}" if t.get("cost_usd") is not None else "cost unknown"
    reasons = f" [{', '.join(t['incomplete_reasons'])}]" if t.get("incomplete_reasons") else ""
    lines = [
        f"trace {t['trace_id']}  revision {t['revision']} of {len(t.get('revisions', [1]))}",
        f"target  {t['service_name']} / {t['agent_name']} / {t['service_version']}",
        f"status  {t['status']} ({t['close_reason']}){reasons}"
        + ("" if t.get("agent_run", True) else "  (not an agent run)"),
        f"totals  {t['steps']} steps, {t['tool_calls']} tool calls, {t['llm_calls']} LLM calls,"
        f" {t['input_tokens']}→{t['output_tokens']} tokens, {cost},"
        f" {t['error_count']} errors, {t['duration_ms']:.0f} ms",
    ]
    if t.get("replica"):  # --cluster: where it was found
        lines.insert(1, f"replica {t['replica']}")
    if t.get("verdict"):
        why = ", ".join(t.get("verdict_reasons") or [])
        lines.append(f"verdict {t['verdict']}" + (f" ({why})" if why else ""))
    if t.get("case_id"):
        lines.append(f"case    {t['case_id']}")
    if t.get("input"):
        lines.append(f"input   {abbreviate(t['input'], 100)}")
    if t.get("final_output"):
        lines.append(f"output  {abbreviate(t['final_output'], 100)}")
    return lines


def step_line(step: dict[str, Any]) -> str:
    """One step: the tree on the left, `#seq` (what findings cite) before its details."""
    label = f"{'  ' * step['depth']}{step['kind']:<8} {step['name']}"
    detail = abbreviate(step.get("arguments"))
    if step.get("approval_status"):
        detail = f"approval={step['approval_status']} {detail}"
    if step.get("policy_decision"):
        detail = f"policy {step.get('policy_name')}={step['policy_decision']}"
    status = step["status"] + (f" {step['error_type']}" if step.get("error_type") else "")
    return (
        f"{label:<44} {'#' + str(step['seq']):>4} {detail:<{ARGUMENT_WIDTH}} {status:<10}"
        f" {step['duration_ms']:>8.1f} ms  {tokens(step)}"
    ).rstrip()


def findings(t: dict[str, Any]) -> list[str]:
    """Failed and review results, whole (a message cut short hides the matcher it names)."""
    by_span = {s["span_id"]: s["seq"] for s in t["steps_detail"]}
    lines = []
    for r in t.get("results", []):
        if r["verdict"] not in ("fail", "review"):
            continue
        seqs = ", ".join(f"#{by_span[e]}" for e in r.get("evidence_span_ids") or [] if e in by_span)
        lines.append(
            f"{r['verdict']:<6} {r['pack']}/{r['rule_id']} {r['reason']}"
            + (f" at steps {seqs}" if seqs else "")
            + f": {' '.join((r['message'] or '').split())}"
        )
    return lines


def render(t: dict[str, Any]) -> str:
    """The trajectory as `sextant show` prints it."""
    lines = [*header(t), "", *(step_line(s) for s in t["steps_detail"])]
    found = findings(t)
    return "\n".join(lines + (["", *found] if found else []))
