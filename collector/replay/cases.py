"""Stored trajectories as regression cases for `sextant rules test`, and as documents."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson

from collector.errors import SextantError
from collector.replay.selection import check_trace_id
from collector.store.runs import Source
from evaluators.model import Step, Trajectory


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


# Rule types `sextant rules test` cannot run offline: an LLM judge, another evaluator's event.
# Their verdicts stay in a case's `expect.rules` (people's labels for `judge calibrate`), but not
# in its expected pack verdict, which rules test must be able to reproduce.
ONLINE_ONLY = ("judge", "evaluation")


def expectation(results: list[dict[str, Any]]) -> dict[str, Any]:
    """What one pack decided: its verdict (by the rules a test can run) and each rule's."""
    offline = [r for r in results if r.get("rule_type") not in ONLINE_ONLY]
    return {
        "verdict": pack_verdict(offline) if offline else "none",
        "rules": {r["rule_id"]: r["verdict"] for r in results},
    }


def trajectory_from_json(doc: dict[str, Any]) -> Trajectory:
    """A trajectory as `GET /api/v1/trajectories/{id}` returns it (what `rules test` and
    `judge calibrate` read)."""
    step_fields = {f for f in Step.__dataclass_fields__ if not f.startswith("_")}
    trajectory_fields = set(Trajectory.__dataclass_fields__) - {"steps"}
    steps = []
    for data in doc.get("steps_detail", []):
        fields = {k: v for k, v in data.items() if k in step_fields}
        fields.setdefault("span_kind", data.get("kind", "other"))
        fields["attributes_json"] = orjson.dumps(data.get("attributes") or {}).decode()
        steps.append(Step(**fields))
    fields = {k: v for k, v in doc.items() if k in trajectory_fields}
    fields.setdefault("incomplete_reasons", doc.get("incomplete_reasons") or [])
    return Trajectory(steps=steps, **fields)


def json_value(text: Any) -> Any:
    """A JSON column as its value (the API gives JSON columns as text); other text as it is."""
    if not isinstance(text, str):
        return text
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return text


def expected_run(doc: dict[str, Any]) -> dict[str, Any]:
    """What a stored run makes a case expect besides verdicts: its final answer and its tool
    calls in order (people edit them into what the run should have done)."""
    calls = [
        {"name": s.get("tool_name") or s["name"], "arguments": json_value(s.get("arguments"))}
        for s in doc.get("steps_detail", [])
        if s.get("span_kind", s.get("kind")) == "tool"
    ]
    return {"answer": doc.get("final_output"), "tool_calls": calls}


def as_case(doc: dict[str, Any], pack: str | None) -> dict[str, Any]:
    """The trajectory plus `expect`: what the pack decided when it was stored.

    Without `pack`, a run judged by several packs keeps each one's expectation under
    `expect.packs`, and `sextant rules test PACK` takes the one of the pack it tests: the pack
    is known there, so the export need not guess it."""
    by_pack: dict[str, list[dict[str, Any]]] = {}
    for r in doc.get("results", []):
        by_pack.setdefault(r["pack"], []).append(r)
    if pack is not None and by_pack and pack not in by_pack:
        raise SextantError(
            f"trace {doc['trace_id']} has no results of pack {pack!r}"
            f" (it has {', '.join(sorted(by_pack))})"
        )
    run = expected_run(doc)
    if pack is None and len(by_pack) > 1:
        packs = {name: expectation(results) for name, results in sorted(by_pack.items())}
        return {**doc, "expect": {"packs": packs, **run}}
    name = pack or next(iter(by_pack), None)
    return {**doc, "expect": {**expectation(by_pack.get(name, []) if name else []), **run}}


def expected_of(case: dict[str, Any], pack: str) -> dict[str, Any]:
    """The expectation a case holds for `pack` (see as_case); an error naming the packs it has."""
    expect = case.get("expect", {})
    if "packs" not in expect:
        return expect
    if pack not in expect["packs"]:
        raise SextantError(
            f"no expectation for pack {pack!r}; the case has {', '.join(expect['packs'])}"
            " (export it with --pack NAME)"
        )
    return expect["packs"][pack]


def export_cases(source: Source, trace_ids: list[str], out: Path, pack: str | None) -> int:
    """Write the cases as JSONL; how many were written."""
    cases = [as_case(trajectory_doc(source, t), pack) for t in trace_ids]
    option = orjson.OPT_NAIVE_UTC | orjson.OPT_UTC_Z
    out.write_bytes(b"".join(orjson.dumps(c, option=option) + b"\n" for c in cases))
    return len(cases)
