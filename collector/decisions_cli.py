"""`sextant decisions` and `sextant alerts test`: the decisions API from a terminal."""

from __future__ import annotations

import urllib.parse
from typing import Any

import orjson

from collector.admin_client import AdminClient


def client(args: Any) -> AdminClient:
    return AdminClient(args.url, getattr(args, "token", None), timeout=30)


def get(args: Any, path: str) -> dict[str, Any]:
    return orjson.loads(client(args).get(path))


def post(args: Any, path: str, body: dict[str, Any]) -> dict[str, Any]:
    return orjson.loads(client(args).post(path, orjson.dumps(body)))


def table(headers: list[str], rows: list[list[str]]) -> str:
    widths = [
        max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)
    ]
    lines = ["  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True))]
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in rows]
    return "\n".join(line.rstrip() for line in lines)


def target(d: dict[str, Any]) -> str:
    return f"{d['service_name']}/{d['agent_name']}@{d['service_version']}"


def render(decisions: list[dict[str, Any]]) -> str:
    if not decisions:
        return "no decisions"
    rows = [
        [
            d["decision_id"],
            d["decision"],
            d["state"],
            target(d),
            ",".join(d["reasons"] or []),
            d["owner"] or "",
            (d["fired_at"] or d["active_at"] or "")[:19],
            (d["evidence_trace_ids"] or [""])[0],
            d["actor"] if d["event"] in ("ack", "resolve") else "",
        ]
        for d in decisions
    ]
    headers = ["ID", "DECISION", "STATE", "TARGET", "REASONS", "OWNER", "SINCE", "EVIDENCE", "BY"]
    return table(headers, rows)


def render_history(history: list[dict[str, Any]]) -> str:
    rows = [
        [
            str(h["seq"]),
            h["changed_at"][:19],
            h["event"],
            h["state"],
            h["actor"] or "",
            h["note"] or "",
            ",".join(h["reasons"] or []),
        ]
        for h in history
    ]
    return table(["SEQ", "AT", "EVENT", "STATE", "BY", "NOTE", "REASONS"], rows)


def run(args: Any) -> int:
    action = args.decisions_command or "list"
    if action == "list":
        query = {} if args.all else {"state": "active"}
        for name in ("service", "agent", "version", "decision"):
            if getattr(args, name):
                query[name] = getattr(args, name)
        doc = get(args, f"/api/v1/decisions?{urllib.parse.urlencode(query)}")
        out = orjson.dumps(doc, option=orjson.OPT_INDENT_2).decode() if args.json else None
        print(out or render(doc["decisions"]))
        return 0
    path = f"/api/v1/decisions/{urllib.parse.quote(args.id)}"
    if action == "show":
        doc = get(args, path)
        print(render_history(doc["history"]))
        return 0
    doc = post(args, f"{path}/{action}", {"by": args.by, "note": args.note})
    print(f"{doc['decision_id']}: {action} by {doc['by']} ({doc['state']})")
    return 0


def alerts_test(args: Any) -> int:
    doc = post(args, "/api/v1/alerts/test", {})
    channels = doc["channels"]
    if not channels:
        print("no alert channels configured (alerts.alertmanager, alerts.webhooks)")
        return 1
    rows = [
        [
            c["channel"],
            c["kind"],
            "ok" if c["ok"] else "FAILED",
            str(c["http_status"] or ""),
            c["error"] or "",
        ]
        for c in channels
    ]
    print(table(["CHANNEL", "KIND", "RESULT", "HTTP", "ERROR"], rows))
    return 0 if all(c["ok"] for c in channels) else 1
