"""What the model said, on a trajectory's page in real Chromium, for runs recorded from the real
instrumentations (tests/testdata/otlp-captures): each model call shows the messages it was sent
and what it answered (text and the tool calls it asked for), each tool step its arguments and
result, each retrieval its documents; long text folded, markup shown as text."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from playwright.sync_api import Browser, Locator, Page

from tests.support.admin import trajectory
from tests.support.agents import provider_for, trace_id_of
from tests.support.browser import new_page, screenshot
from tests.support.captures import CAPTURES, expected_for, send
from tests.support.paths import TESTDATA
from tests.support.server import FAST, RunningServer, serve

# the booking run as four instrumentations recorded it
BOOKINGS = [
    "langgraph-openinference-booking_ok",
    "langgraph-openllmetry-booking_ok",
    "openai_agents-openinference-booking_ok",
    "python_sdk-genai_semconv-booking_ok",
]
SESSION = TESTDATA / "otlp-multi" / "langgraph-openinference-session_stale_approval.otlp.json"


@dataclass
class Sent:
    server: RunningServer


@pytest.fixture(scope="module")
def sent(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sent]:
    server = serve(tmp_path_factory.mktemp("console-messages"), assembler=FAST)
    try:
        for name in BOOKINGS:
            path = CAPTURES / f"{name}.otlp.json"
            send(server, path, "http/json")
        send(server, SESSION, "http/json")
        yield Sent(server)
    finally:
        server.stop()


def llm_rows(page: Page) -> list[Locator]:
    rows = page.locator("#steps tbody tr").all()
    return [
        r
        for r in rows
        if r.locator(".kind").inner_text() == "llm" and r.locator(".messages").count()
    ]


@pytest.mark.parametrize("name", BOOKINGS)
def test_a_model_calls_messages_and_a_tools_payload_are_shown(
    chromium: Browser, sent: Sent, name: str
) -> None:
    expected = expected_for(CAPTURES / f"{name}.otlp.json")
    trajectory(sent.server, expected["trace_id"])
    first_call = expected["tool_calls"][0]
    with new_page(chromium, javascript=False) as page:
        page.goto(f"{sent.server.admin_url}/trajectories/{expected['trace_id']}")
        calls = llm_rows(page)
        assert len(calls) >= 2
        # the first call: the system prompt and the user's question, then the tool it asked for
        first = calls[0]
        roles = first.locator(".message .role").all_inner_texts()
        assert [r.lower() for r in roles[:2]] == ["system", "user"]
        user = first.locator(".message.role-user .text").first
        assert user.is_visible() and user.inner_text() == expected["user_input"]
        asked = first.locator(".completion .tool-call").first
        assert asked.locator(".tool-name").inner_text() == first_call["name"]
        assert json.loads(asked.locator("pre.json").inner_text()) == first_call["arguments"]
        # a later call shows what it added (the tool's answer); the conversation before is folded
        second = calls[1]
        assert second.locator(".message.role-tool").first.is_visible()
        earlier = second.locator("details.earlier")
        assert earlier.count() == 1 and not earlier.locator(".message").first.is_visible()
        # the last call answered in words: the run's answer
        answer = calls[-1].locator(".completion .message.role-assistant .text").last
        assert answer.is_visible() and answer.inner_text() == expected["final_answer"]
        # the tool step: its arguments and result, folded, highlighted
        tool = page.locator(f'#steps tr[data-name="{first_call["name"]}"]').first
        assert tool.locator(".kind").inner_text() == "tool"
        arguments, result = tool.locator("details.payload pre").all()
        assert not arguments.is_visible()
        tool.locator("details.payload summary").first.click()
        assert json.loads(arguments.inner_text()) == first_call["arguments"]
        assert (
            arguments.locator(".j-key").first.inner_text()
            == '"' + next(iter(first_call["arguments"])) + '"'
        )
        tool.locator("details.payload summary").nth(1).click()
        assert "TP1187" in result.inner_text()
        if name == BOOKINGS[0]:
            screenshot(page, "messages", page.locator("#steps"))


def test_a_retrievals_documents_are_shown(chromium: Browser, sent: Sent) -> None:
    doc = json.loads(SESSION.read_text())
    spans = [s for rs in doc["resourceSpans"] for ss in rs["scopeSpans"] for s in ss["spans"]]
    (trace_id,) = {s["traceId"] for s in spans if "KnowledgeBaseRetriever" in s["name"]}
    trajectory(sent.server, trace_id)
    with new_page(chromium, javascript=False) as page:
        page.goto(f"{sent.server.admin_url}/trajectories/{trace_id}")
        step = page.locator("#steps tbody tr", has=page.locator(".kind-retrieval")).first
        documents = step.locator(".document")
        assert documents.count() == 2
        assert documents.locator(".doc-id").all_inner_texts() == ["kb-101", "kb-207"]
        assert documents.locator(".doc-title").all_inner_texts() == [
            "Refund policy - gold tier",
            "Late refunds",
        ]
        assert "score 0.82" in documents.first.inner_text()
        assert "refund" in documents.first.locator(".text").inner_text().lower()


LONG_QUESTION = "Summarise this ticket thread.\n" + "\n".join(
    f"line {i}: <img src=x onerror=alert({i})> the customer wrote again" for i in range(40)
)


def test_a_long_message_is_folded_and_its_markup_shown_as_text(
    chromium: Browser, sent: Sent
) -> None:
    """A model call sent a long message full of markup, by the OTel SDK: the page folds it
    behind its first line, and opened it reads as the text it was, no element made of it."""
    exporter = OTLPSpanExporter(endpoint=sent.server.grpc_endpoint, insecure=True)
    provider = provider_for(exporter, service="support-desk")
    tracer = provider.get_tracer("agent_loop")
    messages = [{"role": "user", "parts": [{"type": "text", "content": LONG_QUESTION}]}]
    with tracer.start_as_current_span("invoke_agent summariser") as root:
        root.set_attribute("gen_ai.operation.name", "invoke_agent")
        root.set_attribute("gen_ai.agent.name", "summariser")
        with tracer.start_as_current_span("chat gpt-4.1-mini") as call:
            call.set_attribute("gen_ai.operation.name", "chat")
            call.set_attribute("gen_ai.request.model", "gpt-4.1-mini")
            call.set_attribute("gen_ai.input.messages", json.dumps(messages))
    provider.shutdown()
    trace_id = trace_id_of(root)
    trajectory(sent.server, trace_id)
    with new_page(chromium, javascript=True) as page:
        page.goto(f"{sent.server.admin_url}/trajectories/{trace_id}")
        (call_row,) = llm_rows(page)
        folded = call_row.locator(".message.role-user details.long")
        assert folded.locator("summary").inner_text().startswith("Summarise this ticket thread.")
        text = folded.locator(".text")
        assert not text.is_visible()
        folded.locator("summary").click()
        assert text.inner_text() == LONG_QUESTION
        assert page.locator("#steps img").count() == 0
