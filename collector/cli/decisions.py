"""`sextant decisions [show | ack | resolve]`: the decisions API from a terminal."""

from __future__ import annotations

import argparse
import urllib.parse
from typing import Any

from collector.cli._cluster import add_cluster
from collector.cli._flags import add_command, add_format, add_url_token
from collector.decisions.state import ACTIVE_FILTER, Event
from evaluators.base import precedence_text

LIST_COLUMNS = ["decision_id", "decision", "state", "target", "reasons", "owner", "since",
                "evidence", "by"]  # fmt: skip
HISTORY_COLUMNS = ["seq", "changed_at", "event", "state", "actor", "note", "reasons"]


def register(sub: Any) -> None:
    decisions = add_command(
        sub,
        "decisions",
        "current decisions; the history of one; acknowledge or resolve one"
        f" (strongest first: {precedence_text()})",
        "sextant decisions --decision QUARANTINE --url http://localhost:9464",
    )
    add_url_token(decisions)
    add_cluster(decisions)
    decisions.add_argument("--all", action="store_true", help="include resolved decisions")
    add_format(decisions, json_alias=True)
    for name in ("service", "agent", "version", "decision"):
        decisions.add_argument(f"--{name}", help=f"only this {name}")
    dsub = decisions.add_subparsers(dest="decisions_command", metavar="COMMAND")
    show = add_command(
        dsub, "show", "the history of one decision", "sextant decisions show DECISION_ID"
    )
    show.add_argument("id")
    add_url_token(show)
    add_format(show)
    by_hand = ((Event.ACK, "acknowledge: you own it now"), (Event.RESOLVE, "resolve it by hand"))
    for event, text in by_hand:
        verb = event.value  # argparse shows the choices as they are given: plain words
        p = add_command(dsub, verb, text, f"sextant decisions {verb} DECISION_ID --by ana")
        p.add_argument("id")
        p.add_argument("--by", required=True, help="who acts (recorded in the history)")
        p.add_argument("--note", default="", help="why, or what was done")
        if event == Event.RESOLVE:
            p.add_argument(
                "--dataset",
                help="recertify on this dataset first: it must replay clean under the packs in"
                " force (default where decisions.recertify requires it: the decision's id)",
            )
        add_url_token(p)
    decisions.set_defaults(func=run)


def client(args: argparse.Namespace) -> Any:
    from collector.cli._client import AdminClient

    return AdminClient(args.url, args.token, timeout=30)


def listed(d: dict[str, Any]) -> dict[str, Any]:
    """A decision as a row of the list: its target in one cell, one evidence trace."""
    return {
        **d,
        "target": f"{d['service_name']}/{d['agent_name']}@{d['service_version']}",
        "since": (d["fired_at"] or d["active_at"] or "")[:19],
        "evidence": (d["evidence_trace_ids"] or [""])[0],
        "by": d["actor"] if d["event"] in (Event.ACK, Event.RESOLVE) else "",
    }


def cluster_list(args: argparse.Namespace, path: str) -> int:
    """Every replica's decisions, strongest first, each with its replica."""
    from collector.cli._cluster import ask_all
    from collector.cli._output import Table, emit
    from evaluators.base import DECISION_STRENGTH, Decision

    answers, whole = ask_all(args, lambda c: c.get_json(path)["decisions"])
    found = [{**d, "replica": replica} for replica, doc in answers for d in doc]
    found.sort(key=lambda d: (DECISION_STRENGTH[Decision(d["decision"])], d["replica"]))
    rows = [listed(d) for d in found]
    columns = ["replica", *LIST_COLUMNS]
    headers = [c.upper() if c != "decision_id" else "ID" for c in columns]
    table = Table(rows, columns, headers, empty="no decisions")
    emit(table, args.format, doc={"decisions": found})
    return 0 if whole else 1


def run(args: argparse.Namespace) -> int:
    from collector.cli._output import Table, emit

    action = args.decisions_command or "list"
    if action == "list":
        query = {} if args.all else {"state": ACTIVE_FILTER}
        for name in ("service", "agent", "version", "decision"):
            if getattr(args, name):
                query[name] = getattr(args, name)
        path = f"/api/v1/decisions?{urllib.parse.urlencode(query)}"
        if args.cluster is not None:
            return cluster_list(args, path)
        doc = client(args).get_json(path)
        rows = [listed(d) for d in doc["decisions"]]
        headers = [c.upper() if c != "decision_id" else "ID" for c in LIST_COLUMNS]
        emit(Table(rows, LIST_COLUMNS, headers, empty="no decisions"), args.format, doc=doc)
        return 0
    path = f"/api/v1/decisions/{urllib.parse.quote(args.id)}"
    if action == "show":
        doc = client(args).get_json(path)
        history = [{**h, "changed_at": h["changed_at"][:19]} for h in doc["history"]]
        headers = ["SEQ", "AT", "EVENT", "STATE", "BY", "NOTE", "REASONS"]
        emit(Table(history, HISTORY_COLUMNS, headers), args.format, doc=doc)
        return 0
    body = {"by": args.by, "note": args.note}
    if getattr(args, "dataset", None):
        body["dataset"] = args.dataset
    doc = client(args).post_json(f"{path}/{action}", body)
    print(f"{doc['decision_id']}: {action} by {doc['by']} ({doc['state']})")
    return 0
