"""`sextant rules validate | test | status`: pack authors' and SREs' view of the rule packs."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from collector.cli._flags import add_command, add_format, add_source, add_url_token

STATUS_COLUMNS = ["pack", "rule", "status", "evaluated", "passed", "failed", "reviewed",
                  "not_applicable", "errored"]  # fmt: skip
STATUS_HEADERS = ["pack", "rule", "status", "evaluated", "pass", "fail", "review", "n/a", "errors"]


def register(sub: Any) -> None:
    rules = add_command(
        sub, "rules", "validate, test and inspect rule packs", "sextant rules validate rules/"
    )
    rules_sub = rules.add_subparsers(dest="rules_command", required=True, metavar="COMMAND")
    validate = add_command(
        rules_sub,
        "validate",
        "check packs; every error with file:line, exit 1 on any",
        "sextant rules validate rules/ my-pack.yaml",
    )
    validate.add_argument("paths", nargs="+", type=Path, help="pack files or directories")
    validate.set_defaults(func=run_validate)
    test = add_command(
        rules_sub,
        "test",
        "run a pack over JSONL trajectory cases; exit 1 when one is not as expected",
        "sextant rules test rules/support-agent.yaml --cases cases.jsonl",
    )
    test.add_argument("pack", type=Path, help="the pack file")
    test.add_argument("--cases", type=Path, help="JSONL: a trajectory and its `expect` per line")
    test.add_argument("--dataset", help="a dataset stored in the collector (`sextant dataset`)")
    add_source(test)
    test.set_defaults(func=run_test)
    status = add_command(
        rules_sub,
        "status",
        "packs in force and evaluator health of a running collector",
        "sextant rules status --url http://localhost:9464",
    )
    add_url_token(status)
    add_format(status, json_alias=True)
    status.set_defaults(func=run_status)


def run_validate(args: argparse.Namespace) -> int:
    """Check packs without running anything; non-zero on any error."""
    from collector.evaluation.packs import pack_files
    from evaluators.rulepack import RulePackError, load_pack

    missing = [p for p in args.paths if not p.exists()]
    for path in missing:
        print(f"{path}: no such file or directory", file=sys.stderr)
    files, failures = pack_files(args.paths), len(missing)
    names: dict[str, Path] = {}
    for path in files:
        try:
            pack = load_pack(path).pack
        except RulePackError as exc:
            failures += 1
            print("\n".join(exc.errors), file=sys.stderr)
            continue
        if pack.name in names:
            failures += 1
            print(
                f"{path}:1: name: pack {pack.name!r} is already defined in {names[pack.name]}",
                file=sys.stderr,
            )
            continue
        names[pack.name] = path
        print(
            f"{path}: ok: {pack.name} {pack.version} ({len(pack.rules)} rules, owner {pack.owner})"
        )
    if not files and not missing:
        print("no rule packs found", file=sys.stderr)
        return 1
    if missing:  # a path that cannot be read is a usage error (2), an invalid pack a failed check
        return 2
    return 1 if failures else 0


def read_cases(path: Path) -> list[dict[str, Any]]:
    """The cases of a JSONL file; a usage error naming the file and line when unreadable."""
    import orjson

    from collector.cli._errors import UsageError

    try:
        text = path.read_text()
    except OSError as exc:
        raise UsageError(f"--cases {path}: cannot read it ({exc.strerror or exc})") from exc
    cases = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            doc = orjson.loads(line)
        except orjson.JSONDecodeError as exc:
            raise UsageError(f"{path}:{number}: not a JSON object ({exc})") from exc
        if not isinstance(doc, dict):
            raise UsageError(f"{path}:{number}: not a JSON object")
        cases.append({"line": number, **doc})
    return cases


def run_test(args: argparse.Namespace) -> int:
    """Each case (of a JSONL file or a stored dataset): the pack's verdict and rule verdicts
    against `expect`."""
    from collector.cli._errors import UsageError
    from collector.replay.check import check_case, online_rules
    from evaluators.rulepack import RulePackError, load_pack

    try:
        pack = load_pack(args.pack).pack
    except RulePackError as exc:
        raise UsageError("\n".join(exc.errors)) from exc
    if (args.cases is None) == (args.dataset is None):
        raise UsageError("give --cases FILE or --dataset NAME (one of them)")
    cases = read_cases(args.cases) if args.cases else dataset_cases(args, pack.name)
    online, failed = online_rules(pack), 0
    if online:
        print(f"not run offline (judges, evaluation events): {', '.join(sorted(online))}")
    for doc in cases:
        checked = check_case(doc, pack)
        where = f"{args.cases}:{doc['line']}" if args.cases else f"{args.dataset}"
        label = f"{where} ({doc.get('trace_id', '?')})"
        if not checked.problems:
            print(f"ok   {label}: {checked.verdict}")
            continue
        failed += 1
        print(f"FAIL {label}: " + "; ".join(checked.problems))
        for line in checked.objections:
            print(f"     {line}")
    print(f"{len(cases) - failed} of {len(cases)} cases as expected")
    return 1 if failed else 0


def dataset_cases(args: argparse.Namespace, pack: str) -> list[dict[str, Any]]:
    """The dataset's cases as `rules test` cases of `pack`, read from the store."""
    from collector.cli._source import SourceSpec
    from collector.datasets.cases import as_test_case
    from collector.datasets.store import load_cases

    source = SourceSpec.of(args).open()
    try:
        return [as_test_case(case, pack) for case in load_cases(source, args.dataset)]
    finally:
        source.close()


def run_status(args: argparse.Namespace) -> int:
    from collector.cli._client import AdminClient
    from collector.cli._output import Table, emit

    status = AdminClient(args.url, args.token).get_json("/api/v1/rules")
    status = status or {"packs": [], "rules": []}
    if args.format != "table":
        emit(Table(status["rules"], STATUS_COLUMNS), args.format, doc=status)
        return 0
    for pack in status["packs"]:
        state = f"{pack['pack']} {pack['version']}" if pack["pack"] else "(not loaded)"
        print(f"{pack['source']}: {state}")
        for error in pack["refused"]:
            print(f"  refused: {error}")
    print()
    notes = [
        f"last error of {r['pack']}/{r['rule']} at {r['last_error_at']}: {r['last_error']}"
        for r in status["rules"]
        if r["last_error"]
    ]
    emit(Table(status["rules"], STATUS_COLUMNS, STATUS_HEADERS, notes=notes), "table")
    return 0
