"""A retrieval that found nothing, as LangGraph under OpenInference and OpenLLMetry records it
(an explicit empty document list), sent through the server: nothing grounds the answer, which
the grounding rule fails saying so; no document is stale or beyond the user's access, so the
freshness and access rules pass. It is not a review for want of evidence."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.admin import trajectory
from tests.support.captures import send
from tests.support.paths import TESTDATA
from tests.support.server import FAST, serve

PACK = """
name: rag
version: "1"
owner: support-oncall
selector: {service: support-desk}
rules:
  - id: grounded
    type: retrieval
    min_documents: 1
    reason: ungrounded_answer
  - id: fresh-documents
    type: retrieval
    max_age: 180d
    reason: stale_documents
  - id: documents-the-user-may-see
    type: retrieval
    access: {allowed: [public, internal]}
    reason: document_beyond_access
"""
CAPTURES = sorted((TESTDATA / "otlp-multi").glob("langgraph-*-empty_retrieval.otlp.json"))


def retrieving_trace(path: Path) -> str:
    """The trace of the run that retrieved (OpenLLMetry also sends its build-time trace)."""
    doc = json.loads(path.read_text())
    spans = [s for rs in doc["resourceSpans"] for ss in rs["scopeSpans"] for s in ss["spans"]]
    (trace_id,) = {s["traceId"] for s in spans if "KnowledgeBaseRetriever" in s["name"]}
    return trace_id


@pytest.mark.parametrize("path", CAPTURES, ids=lambda p: p.name.split(".")[0])
def test_a_retrieval_that_found_nothing_fails_grounding(tmp_path: Path, path: Path) -> None:
    running = serve(tmp_path, {"rag": PACK}, assembler=FAST)
    try:
        send(running, path, "http/json")
        t = trajectory(running, retrieving_trace(path))
        (step,) = [s for s in t["steps_detail"] if s["kind"] == "retrieval"]
        assert step["documents"] == []  # known to be empty, not unknown
        found = {r["rule_id"]: (r["verdict"], r["reason"]) for r in t["results"]}
        assert found == {
            "grounded": ("fail", "no_documents"),
            "fresh-documents": ("pass", None),
            "documents-the-user-may-see": ("pass", None),
        }
        (grounded,) = [r for r in t["results"] if r["rule_id"] == "grounded"]
        assert "returned no documents" in grounded["message"]
        assert step["span_id"] in grounded["evidence_span_ids"]
    finally:
        running.stop()
