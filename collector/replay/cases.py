"""Stored trajectories as regression cases for `sextant rules test`, and as documents."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson

from collector.errors import SextantError
from collector.replay.selection import check_trace_id
from collector.replay.sources import DuckDBSource, LiveSource, Source, SourceSpec
from collector.store.queries import load_trajectory


def trajectory_doc(source: Source, trace_id: str) -> dict[str, Any]:
    """The document `GET /api/v1/trajectories/{id}` returns (what `rules test` reads)."""
    trace_id = check_trace_id(trace_id)
    if isinstance(source, LiveSource):
        doc = orjson.loads(source.client.get(f"/api/v1/trajectories/{trace_id}"))
    else:
        assert isinstance(source, DuckDBSource)
        doc = load_trajectory(source.con.cursor(), trace_id)
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


def as_case(doc: dict[str, Any], pack: str | None) -> dict[str, Any]:
    """The trajectory plus `expect`: what the pack decided when it was stored."""
    by_pack: dict[str, list[dict[str, Any]]] = {}
    for r in doc.get("results", []):
        by_pack.setdefault(r["pack"], []).append(r)
    if pack is None and len(by_pack) > 1:
        raise SextantError(
            f"trace {doc['trace_id']} was evaluated by several packs"
            f" ({', '.join(sorted(by_pack))}); choose the one the cases are for with --pack"
        )
    name = pack or next(iter(by_pack), None)
    results = by_pack.get(name, []) if name else []
    expect = {
        "verdict": pack_verdict(results) if results else "none",
        "rules": {r["rule_id"]: r["verdict"] for r in results},
    }
    return {**doc, "expect": expect}


def export_cases(spec: SourceSpec, trace_ids: list[str], out: Path, pack: str | None) -> int:
    source = spec.open()
    try:
        cases = [as_case(trajectory_doc(source, t), pack) for t in trace_ids]
    finally:
        source.close()
    option = orjson.OPT_NAIVE_UTC | orjson.OPT_UTC_Z
    out.write_bytes(b"".join(orjson.dumps(c, option=option) + b"\n" for c in cases))
    print(f"wrote {len(cases)} cases to {out}")
    return 0
