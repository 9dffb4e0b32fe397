"""The documents a retrieval step returned, whatever the instrumentation wrote them as.

- OpenInference: `retrieval.documents.{i}.document.{id,score,content,metadata}` (LangChain's
  instrumentation writes only content and metadata; the ids are then in `output.value`'s
  `documents` list, the score, when the retriever gives one, in the metadata);
- OTel GenAI: `gen_ai.retrieval.documents`, a list of `{"id", "score"}` (JSON text or a value);
- OpenLLMetry: the retriever task's output, `traceloop.entity.output` (or `gen_ai.task.output`):
  `{"documents": [{"page_content", "metadata"}], ...}`.
A document's score is its own, else `score` (or `relevance_score`) in its metadata.
An empty list written by any of them (`{"documents": []}`, `[]`) is a retrieval that found
nothing, which is known; no list at all is a retrieval whose documents are unknown.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import orjson

if TYPE_CHECKING:
    from evaluators.model import Step

FLAT = re.compile(r"^retrieval\.documents\.(\d+)\.document\.(id|score|content|metadata)$")
OUTPUTS = ("output.value", "traceloop.entity.output", "gen_ai.task.output")
SCORE_KEYS = ("score", "relevance_score")


@dataclass(frozen=True)
class Document:
    id: str | None
    score: float | None
    content_length: int | None
    metadata: dict[str, Any] = field(default_factory=dict)
    content: str | None = field(default=None, compare=False, repr=False)  # for display only


def decoded(value: Any) -> Any:
    if isinstance(value, str | bytes) and value[:1] in ("{", "[", b"{", b"["):
        try:
            return orjson.loads(value)
        except orjson.JSONDecodeError:
            return value
    return value


def number(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return None
    return None


def document(fields: dict[str, Any]) -> Document:
    """One document from its fields in any of the shapes (page_content, content, text...)."""
    metadata = decoded(fields.get("metadata"))
    metadata = metadata if isinstance(metadata, dict) else {}
    content = next(
        (fields[k] for k in ("content", "page_content", "text") if isinstance(fields.get(k), str)),
        None,
    )
    score = number(fields.get("score"))
    if score is None:
        score = next((number(metadata[k]) for k in SCORE_KEYS if k in metadata), None)
    ident = fields.get("id", metadata.get("id"))
    return Document(
        None if ident is None else str(ident),
        score,
        None if content is None else len(content),
        metadata,
        content,
    )


def listed(attributes: dict[str, Any]) -> list[dict[str, Any]] | None:
    """The documents of a `{"documents": [...]}` output or a GenAI documents list (an empty
    list when it says none); None when the span has no such list."""
    genai = decoded(attributes.get("gen_ai.retrieval.documents"))
    if isinstance(genai, list):
        return [d for d in genai if isinstance(d, dict)]
    if attributes.get("retrieval.documents") == []:  # OpenInference's empty array, unflattened
        return []
    for key in OUTPUTS:
        out = decoded(attributes.get(key))
        if isinstance(out, list) and not out:  # a bare empty answer
            return []
        if isinstance(out, dict) and isinstance(out.get("documents"), list):
            return [d for d in out["documents"] if isinstance(d, dict)]
    return None


def documents_of(attributes: dict[str, Any]) -> list[Document] | None:
    """The retrieval's documents in the order it returned them: [] when it recorded that it
    found none, None when it recorded nothing about them."""
    flat: dict[int, dict[str, Any]] = {}
    for key, value in attributes.items():
        m = FLAT.match(key)
        if m:
            flat.setdefault(int(m.group(1)), {})[m.group(2)] = value
    listing = listed(attributes)
    others = listing or []
    if not flat:
        return None if listing is None else [document(d) for d in others]
    out = []
    for i in sorted(flat):
        fields = flat[i]
        if "id" not in fields and i < len(others) and "id" in others[i]:
            fields = {**fields, "id": others[i]["id"]}  # the ids only the output has
        out.append(document(fields))
    return out


def documents(step: Step) -> list[Document] | None:
    return documents_of(step.attributes)
