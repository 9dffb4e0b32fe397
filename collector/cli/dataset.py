"""`sextant dataset add | list | show`: runs kept as regression cases in the store."""

from __future__ import annotations

import argparse
import urllib.parse
from typing import Any

from collector.cli._flags import add_command, add_format, add_source, add_url_token

LIST_COLUMNS = ["dataset", "cases", "expect_pass", "expect_fail", "as_labelled", "changed_at",
                "last_added_by"]  # fmt: skip
CASE_COLUMNS = ["trace_id", "target", "verdict", "expect", "labels", "added_at", "added_by"]


def register(sub: Any) -> None:
    dataset = add_command(
        sub,
        "dataset",
        "named datasets of stored runs, with the outcome a pack must give them",
        "sextant dataset add refunds-regressions TRACE_ID --expect fail --by ana",
    )
    dsub = dataset.add_subparsers(dest="dataset_command", required=True, metavar="COMMAND")
    add = add_command(
        dsub,
        "add",
        "add runs (their current revision, with reviewers' labels) to a dataset",
        "sextant dataset add NAME TRACE_ID... --expect pass --by ana",
    )
    add.add_argument("name")
    add.add_argument("trace_ids", nargs="*", metavar="TRACE_ID")
    add.add_argument("--decision", help="add every run this decision cites as evidence")
    add.add_argument(
        "--expect",
        choices=("pass", "fail"),
        help="the pack verdict each must get (default: as labelled, else as judged live)",
    )
    add.add_argument("--by", required=True, help="who adds them (recorded with each case)")
    add.add_argument("--note", default="", help="why they are kept")
    add_url_token(add)
    add.set_defaults(func=run_add)
    listing = add_command(dsub, "list", "every dataset", "sextant dataset list")
    add_source(listing)
    add_format(listing)
    listing.set_defaults(func=run_list)
    show = add_command(dsub, "show", "one dataset's cases", "sextant dataset show NAME")
    show.add_argument("name")
    add_source(show)
    add_format(show)
    show.set_defaults(func=run_show)


def run_add(args: argparse.Namespace) -> int:
    from collector.cli._client import AdminClient
    from collector.cli._errors import UsageError

    if bool(args.trace_ids) == bool(args.decision):
        raise UsageError("give TRACE_IDs or --decision ID (one of them)")
    body: dict[str, Any] = {"by": args.by, "expect": args.expect, "note": args.note or None}
    body.update({"decision": args.decision} if args.decision else {"trace_ids": args.trace_ids})
    path = f"/api/v1/datasets/{urllib.parse.quote(args.name, safe='')}/cases"
    doc = AdminClient(args.url, args.token, timeout=60).post_json(path, body)
    expect = args.expect or "as labelled, else as judged"
    print(f"added {len(doc['added'])} runs to dataset {doc['dataset']} (expect {expect})")
    return 0


def run_list(args: argparse.Namespace) -> int:
    from collector.cli._output import Table, emit
    from collector.cli._source import SourceSpec
    from collector.datasets.store import list_datasets

    source = SourceSpec.of(args).open()
    try:
        rows = list_datasets(source)
    finally:
        source.close()
    headers = ["DATASET", "CASES", "PASS", "FAIL", "AS LABELLED", "CHANGED", "BY"]
    emit(Table(rows, LIST_COLUMNS, headers, empty="no datasets"), args.format, doc=rows)
    return 0


def run_show(args: argparse.Namespace) -> int:
    from collector.cli._output import Table, emit
    from collector.cli._source import SourceSpec
    from collector.datasets.service import summary
    from collector.datasets.store import load_cases

    source = SourceSpec.of(args).open()
    try:
        cases = [summary(c) for c in load_cases(source, args.name)]
    finally:
        source.close()
    rows = [
        {
            **c,
            "target": f"{c['service_name']}/{c['agent_name']}@{c['service_version']}",
            "expect": c["expect"] or ("as labelled" if c["labels"] else "as judged"),
            "labels": ", ".join(f"{lab['rule_id']}={lab['verdict']}" for lab in c["labels"]),
            "added_at": c["added_at"][:19],
        }
        for c in cases
    ]
    headers = ["TRACE", "TARGET", "VERDICT", "EXPECT", "LABELS", "ADDED", "BY"]
    emit(
        Table(rows, CASE_COLUMNS, headers), args.format, doc={"dataset": args.name, "cases": cases}
    )
    return 0
