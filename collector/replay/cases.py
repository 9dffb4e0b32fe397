"""Stored trajectories as regression cases for `sextant rules test`, and as documents."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson

from collector.errors import SextantError
from collector.replay.selection import check_trace_id
from collector.replay.sources import Source


def trajectory_doc(source: Source, trace_id: str) -> dict[str, Any]:
    """The document `GET /api/v1/trajectories/{id}` returns (what `rules test` reads)."""
    trace_id = check_trace_id(trace_id)
    doc = source.trajectory(trace_id)
    if doc is None:
        raise SextantError(f"no trajectory for trace {trace_id} in {source.name}")
    return doc


def pack_verdict(results: list[dict[str, Any]]) -> str:
    """A pack's verdict from stored results, by the precedence of evaluators.base."""
    if any(
        r["verdict"] == "fail" and r["requested_decision"] not in (None, "REVIEW") for r in results
    ):
        return "fail"
    if any(r["verdict"] in ("fail", "review") for r in results):
        return "review"
    return "pass"


def case_pack(doc: dict[str, Any], by_pack: dict[str, list[dict[str, Any]]]) -> str | None:
    """The one pack that judged this run: the only pack with results, or the only one whose
    rules applied (a catch-all pack that found nothing to check does not count)."""
    if len(by_pack) <= 1:
        return next(iter(by_pack), None)
    applied = [
        name
        for name, results in by_pack.items()
        if any(r["verdict"] != "not_applicable" for r in results)
    ]
    if len(applied) == 1:
        return applied[0]
    raise SextantError(
        f"trace {doc['trace_id']} was judged by several packs"
        f" ({', '.join(sorted(applied or by_pack))}); say which one the cases are for:"
        " --pack NAME"
    )


def as_case(doc: dict[str, Any], pack: str | None) -> dict[str, Any]:
    """The trajectory plus `expect`: what the pack decided when it was stored."""
    by_pack: dict[str, list[dict[str, Any]]] = {}
    for r in doc.get("results", []):
        by_pack.setdefault(r["pack"], []).append(r)
    name = pack or case_pack(doc, by_pack)
    if pack is not None and by_pack and pack not in by_pack:
        raise SextantError(
            f"trace {doc['trace_id']} has no results of pack {pack!r}"
            f" (it has {', '.join(sorted(by_pack))})"
        )
    results = by_pack.get(name, []) if name else []
    expect = {
        "verdict": pack_verdict(results) if results else "none",
        "rules": {r["rule_id"]: r["verdict"] for r in results},
    }
    return {**doc, "expect": expect}


def export_cases(source: Source, trace_ids: list[str], out: Path, pack: str | None) -> int:
    """Write the cases as JSONL; how many were written."""
    cases = [as_case(trajectory_doc(source, t), pack) for t in trace_ids]
    option = orjson.OPT_NAIVE_UTC | orjson.OPT_UTC_Z
    out.write_bytes(b"".join(orjson.dumps(c, option=option) + b"\n" for c in cases))
    return len(cases)
