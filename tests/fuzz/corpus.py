"""The fuzz targets' seed corpus: the OTLP captures of real agent traffic, as sent (OTLP/JSON)
and as protobuf, one file per request."""

from __future__ import annotations

from pathlib import Path

from tests.support.reference.otlp_json import traces_from_json

CAPTURES = Path(__file__).resolve().parents[1] / "testdata" / "otlp-captures"


def captures() -> list[Path]:
    return sorted(CAPTURES.glob("*.otlp.json"))


def write_corpus(folder: Path) -> Path:
    """Every capture into `folder` (created), in both encodings; returns the folder."""
    folder.mkdir(parents=True, exist_ok=True)
    for path in captures():
        body = path.read_bytes()
        (folder / f"{path.stem}.json").write_bytes(body)
        request = traces_from_json(body)
        (folder / f"{path.stem}.pb").write_bytes(request.SerializeToString())
    return folder
