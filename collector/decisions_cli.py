"""`sextant decisions` and `sextant alerts test`: the decisions API from a terminal."""

from __future__ import annotations

import contextlib
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

import orjson

from collector.errors import SextantError


def request_json(
    url: str, body: dict[str, Any] | None = None, token: str | None = None
) -> dict[str, Any]:
    """GET (or POST `body`) a JSON document; an HTTP error becomes the server's message."""
    headers = {"Content-Type": "application/json"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    data = orjson.dumps(body) if body is not None else None
    request = urllib.request.Request(url, data=data, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=30) as reply:
            return orjson.loads(reply.read())
    except urllib.error.HTTPError as exc:
        detail = exc.read().decode(errors="replace")
        with contextlib.suppress(orjson.JSONDecodeError, KeyError, TypeError):
            detail = orjson.loads(detail)["error"]
        raise SextantError(f"{url}: HTTP {exc.code}: {detail}") from exc
    except urllib.error.URLError as exc:
        raise SextantError(f"cannot reach {url}: {exc.reason}") from exc


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
    base = args.url.rstrip("/")
    action = args.decisions_command or "list"
    if action == "list":
        query = {} if args.all else {"state": "active"}
        for name in ("service", "agent", "version", "decision"):
            if getattr(args, name):
                query[name] = getattr(args, name)
        doc = request_json(f"{base}/api/v1/decisions?{urllib.parse.urlencode(query)}")
        out = orjson.dumps(doc, option=orjson.OPT_INDENT_2).decode() if args.json else None
        print(out or render(doc["decisions"]))
        return 0
    url = f"{base}/api/v1/decisions/{urllib.parse.quote(args.id)}"
    if action == "show":
        doc = request_json(url)
        print(render_history(doc["history"]))
        return 0
    doc = request_json(f"{url}/{action}", {"by": args.by, "note": args.note}, args.token)
    print(f"{doc['decision_id']}: {action} by {doc['by']} ({doc['state']})")
    return 0


def alerts_test(args: Any) -> int:
    doc = request_json(f"{args.url.rstrip('/')}/api/v1/alerts/test", {}, args.token)
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
