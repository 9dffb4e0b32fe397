"""A decision's evidence bundle: everything needed to re-check it later, with SHA-256 of each
file, in one zip."""

from __future__ import annotations

import hashlib
import zipfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, BinaryIO

import orjson

from collector.errors import SextantError
from collector.replay.cases import trajectory_doc
from collector.store.runs import Source

IDS = "(SELECT unnest(?::VARCHAR[]))"
OPTION = orjson.OPT_NAIVE_UTC | orjson.OPT_UTC_Z | orjson.OPT_INDENT_2


def rows(source: Source, sql: str, params: list) -> list[dict[str, Any]]:
    return source.query(sql, params).to_pylist()


def jsonl(items: list[dict[str, Any]]) -> bytes:
    option = orjson.OPT_NAIVE_UTC | orjson.OPT_UTC_Z
    return b"".join(orjson.dumps(i, option=option, default=str) + b"\n" for i in items)


def bundle(source: Source, decision_id: str) -> dict[str, bytes]:
    history = rows(
        source, "SELECT * FROM decisions WHERE decision_id = ? ORDER BY seq", [decision_id]
    )
    if not history:
        raise SextantError(f"no decision {decision_id!r} in {source.name}")
    current = history[-1]
    traces = sorted({t for row in history for t in row["evidence_trace_ids"] or []})
    files: dict[str, bytes] = {
        "decision.json": orjson.dumps(current, option=OPTION, default=str),
        "history.jsonl": jsonl(history),
    }
    # The pack versions the decision names (name@version), as the collector loaded them.
    for ref in sorted({p for row in history for p in row["packs"] or []}):
        name, _, version = ref.partition("@")
        found = rows(
            source,
            "SELECT text FROM rule_packs WHERE name = ? AND version IS NOT DISTINCT FROM ?"
            " ORDER BY loaded_at DESC LIMIT 1",
            [name, version or None],
        )
        if found:
            files[f"packs/{name}@{version}.yaml"] = found[0]["text"].encode()
    files["results.jsonl"] = jsonl(
        rows(
            source,
            f"SELECT * FROM results WHERE trace_id IN {IDS}"
            " ORDER BY trace_id, revision, origin, pack, rule_id",
            [traces],
        )
    )
    for trace_id in traces:
        try:
            doc = trajectory_doc(source, trace_id)
        except SextantError:
            continue  # deleted by retention: the spans below say so by being absent too
        files[f"trajectories/{trace_id}.json"] = orjson.dumps(doc, option=OPTION, default=str)
        files[f"spans/{trace_id}.jsonl"] = jsonl(
            rows(source, "SELECT * FROM spans WHERE trace_id = ? ORDER BY span_id", [trace_id])
        )
    return files


def write_evidence(
    source: Source, decision_id: str, out: Path | BinaryIO, created_at: datetime
) -> int:
    """Write the bundle as a zip (to a file, or a stream such as a download's body) with a
    manifest of SHA-256; how many files it holds."""
    files = bundle(source, decision_id)
    manifest = {
        "decision_id": decision_id,
        "created_at": created_at.replace(tzinfo=UTC).isoformat(),
        "source": source.name,
        "files": {name: hashlib.sha256(data).hexdigest() for name, data in sorted(files.items())},
    }
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in sorted(files.items()):
            archive.writestr(name, data)
        archive.writestr("manifest.json", orjson.dumps(manifest, option=orjson.OPT_INDENT_2))
    return len(files)
