"""`sextant show`: a trajectory as a readable tree in the terminal."""

from __future__ import annotations

from typing import Any

import orjson

ARGUMENT_WIDTH = 60


def abbreviate(value: Any, width: int = ARGUMENT_WIDTH) -> str:
    if value is None:
        return ""
    text = value if isinstance(value, str) else orjson.dumps(value).decode()
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


def tokens(step: dict[str, Any]) -> str:
    if step.get("input_tokens") is None and step.get("output_tokens") is None:
        return ""
    return f"{step.get('input_tokens') or 0}→{step.get('output_tokens') or 0} tok"


def render(t: dict[str, Any]) -> str:
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
    if t.get("verdict"):
        reasons = ", ".join(t.get("verdict_reasons") or [])
        lines.append(f"verdict {t['verdict']}" + (f" ({reasons})" if reasons else ""))
    if t.get("case_id"):
        lines.append(f"case    {t['case_id']}")
    if t.get("input"):
        lines.append(f"input   {abbreviate(t['input'], 100)}")
    if t.get("final_output"):
        lines.append(f"output  {abbreviate(t['final_output'], 100)}")
    lines.append("")
    for step in t["steps_detail"]:
        indent = "  " * step["depth"]
        label = f"{indent}{step['kind']:<8} {step['name']}"
        detail = abbreviate(step.get("arguments"))
        if step.get("approval_status"):
            detail = f"approval={step['approval_status']} {detail}"
        if step.get("policy_decision"):
            detail = f"policy {step.get('policy_name')}={step['policy_decision']}"
        status = step["status"] + (f" {step['error_type']}" if step.get("error_type") else "")
        lines.append(
            f"{label:<48} {detail:<{ARGUMENT_WIDTH}} {status:<10} {step['duration_ms']:>8.1f} ms"
            f"  {tokens(step)}".rstrip()
        )
    findings = [r for r in t.get("results", []) if r["verdict"] in ("fail", "review")]
    if findings:
        lines.append("")
        by_span = {s["span_id"]: s["seq"] for s in t["steps_detail"]}
        for r in findings:
            seqs = ", ".join(
                f"#{by_span[e]}" for e in r.get("evidence_span_ids") or [] if e in by_span
            )
            lines.append(
                f"{r['verdict']:<6} {r['pack']}/{r['rule_id']} {r['reason']}"
                + (f" at steps {seqs}" if seqs else "")
                + f": {abbreviate(r['message'], 120)}"
            )
    return "\n".join(lines)
