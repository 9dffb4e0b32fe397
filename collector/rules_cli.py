"""`sextant rules validate | status | test`: pack authors' and SREs' view of the rule packs."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import orjson

from collector.evaluation.packs import pack_files
from evaluators.base import overall_verdict
from evaluators.engine import evaluate_pack
from evaluators.model import Step, Trajectory
from evaluators.rulepack import RulePackError, load_pack

STEP_FIELDS = {f for f in Step.__dataclass_fields__ if not f.startswith("_")}
TRAJECTORY_FIELDS = set(Trajectory.__dataclass_fields__) - {"steps"}


def validate(paths: list[Path]) -> int:
    """Check packs without running anything; every error with file:line; non-zero on any."""
    files = pack_files(paths)
    missing = [p for p in paths if not p.exists()]
    failures = 0
    for path in missing:
        print(f"{path}: no such file or directory", file=sys.stderr)
        failures += 1
    names: dict[str, Path] = {}
    for path in files:
        try:
            loaded = load_pack(path)
        except RulePackError as exc:
            failures += 1
            for error in exc.errors:
                print(error, file=sys.stderr)
            continue
        pack = loaded.pack
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
    return 1 if failures else 0


def trajectory_from_json(doc: dict[str, Any]) -> Trajectory:
    """A trajectory as `GET /api/v1/trajectories/{id}` returns it (what `rules test` reads)."""
    steps = []
    for data in doc.get("steps_detail", []):
        fields = {k: v for k, v in data.items() if k in STEP_FIELDS}
        fields.setdefault("span_kind", data.get("kind", "other"))
        fields["attributes_json"] = orjson.dumps(data.get("attributes") or {}).decode()
        steps.append(Step(**fields))
    fields = {k: v for k, v in doc.items() if k in TRAJECTORY_FIELDS}
    fields.setdefault("incomplete_reasons", doc.get("incomplete_reasons") or [])
    return Trajectory(steps=steps, **fields)


def test_cases(pack_path: Path, cases: Path) -> int:
    """Run a pack over JSONL cases, each a trajectory plus `expect`: {"verdict", "rules"}."""
    try:
        pack = load_pack(pack_path).pack
    except RulePackError as exc:
        print("\n".join(exc.errors), file=sys.stderr)
        return 2
    failed = 0
    lines = [line for line in cases.read_text().splitlines() if line.strip()]
    for number, line in enumerate(lines, start=1):
        doc = orjson.loads(line)
        expect = doc.get("expect", {})
        results = evaluate_pack(trajectory_from_json(doc), pack)
        got = {r.rule_id: r.verdict.value for r in results}
        verdict = overall_verdict(results).value if results else "none"
        problems = []
        if "verdict" in expect and expect["verdict"] != verdict:
            problems.append(f"verdict {verdict}, expected {expect['verdict']}")
        for rule, want in expect.get("rules", {}).items():
            if got.get(rule, "not_evaluated") != want:
                problems.append(f"{rule}: {got.get(rule, 'not evaluated')}, expected {want}")
        label = f"{cases}:{number} ({doc.get('trace_id', '?')})"
        if problems:
            failed += 1
            print(f"FAIL {label}: " + "; ".join(problems))
            for r in results:
                if r.verdict.value in ("fail", "review"):
                    print(f"     {r.rule_id}: {r.verdict.value} {r.reason}: {r.message}")
        else:
            print(f"ok   {label}: {verdict}")
    print(f"{len(lines) - failed} of {len(lines)} cases as expected")
    return 1 if failed else 0


def render_status(status: dict[str, Any]) -> str:
    lines = []
    for pack in status["packs"]:
        state = f"{pack['pack']} {pack['version']}" if pack["pack"] else "(not loaded)"
        lines.append(f"{pack['source']}: {state}")
        for error in pack["refused"]:
            lines.append(f"  refused: {error}")
    lines.append("")
    header = ("pack", "rule", "status", "evaluated", "pass", "fail", "review", "n/a", "errors")
    rows = [header] + [
        (
            r["pack"],
            r["rule"],
            r["status"],
            str(r["evaluated"]),
            str(r["passed"]),
            str(r["failed"]),
            str(r["reviewed"]),
            str(r["not_applicable"]),
            str(r["errored"]),
        )
        for r in status["rules"]
    ]
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    for row in rows:
        lines.append("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)))
    for r in status["rules"]:
        if r["last_error"]:
            lines.append(
                f"last error of {r['pack']}/{r['rule']} at {r['last_error_at']}: {r['last_error']}"
            )
    return "\n".join(lines)
