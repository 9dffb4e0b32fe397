"""Seeded random agent runs for the guard's differential test (test_native_judge.py): span rows
as the decoder stores them (the columns `rows_of` returns), shaped like the captures' agent
loops (an agent span; model calls naming the tool calls they ask for in the OTel GenAI,
OpenInference or legacy form; the tool spans that run them), with what the captures hold too
little of: approvals granted, denied and unreadable, writes asked for in the approval's own
turn or by no model call, loops, errors, sub-agents, the guard's own refusals, Unicode, nested
JSON and numbers that only compare equal in Python (1 and 1.0 and true, 2**53 + 1)."""

from __future__ import annotations

import json
import random
import re
from dataclasses import dataclass
from typing import Any

import orjson

# The columns of a stored span row, as `decode_request(...).table.to_pylist()` gives them.
ROW_KEYS = (
    *("trace_id", "span_id", "parent_span_id", "trace_state", "flags", "name", "kind"),
    *("start_time_unix_nano", "end_time_unix_nano", "status_code", "status_message"),
    *("resource_attributes", "resource_schema_url", "scope_name", "scope_version"),
    *("scope_attributes", "scope_schema_url", "attributes", "events", "links"),
    *("dropped_attributes_count", "dropped_events_count", "dropped_links_count"),
    *("truncated_attributes", "service_name", "service_version", "step_kind", "operation_name"),
    *("tool_name", "tool_call_id", "tool_arguments", "tool_result", "model", "input_tokens"),
    *("output_tokens", "agent_name", "conversation_id", "user_id", "error_type", "kept_as_text"),
)
BASE_TIME = 1_796_100_000_000_000_000
SLACK = 1_000_000  # evaluators.model.CLOCK_SLACK_NS: how far clocks may disagree
INT64_MAX = 2**63 - 1
LONG_NUMBER = re.compile(r"\d{13}")

SERVICES = ["support-desk"] * 5 + ["support-desk-eu", "research-desk", "travel-desk"]
AGENTS = ["support-agent"] * 6 + ["paper-agent"] * 2 + ["travel-agent", "Support-Agent", "bøt", ""]
MODELS = ["gpt-4.1-mini-2025-04-14", "gpt-4o", "claude-3-5-sonnet-latest", "mystery-model"]
WRITES = ["update_account", "update_account", "update_email", "send_email", "Update_Account"]
READS = ["lookup_customer", "get_account", "search_papers", "fetch_abstract", "search_flights"]
APPROVALS = ["request_approval", "request_approval", "get_approval_status", "Manager_Approval"]
OTHERS = [
    *("web_fetch", "browse_page", "search_web", "send_payment", "transfer_funds", "get_secret"),
    *("http_post", "post_note", "drop_table", "drop_customer", "hold_seat", "ß", "İnfo", "x" * 90),
]
# Other subjects a call may name.
SUBJECTS: list[Any] = [
    *("C-1042", "C-1042", "C-1042", "C-2002", " c-1042 ", "c-1042", 1042, 1042.0, True, 1),
    *(INT64_MAX, 2**64 - 1, 1.8446744073709552e19, 9007199254740993, 9007199254740992.0),
    *(-(2**63), 1e16, 1e-7, 0.1, None, "", 'it\'s "quoted"', "back\\slash", "tab\tnul\x00"),
    *({"id": "C-1042"}, ["C-1042", 2], {"id": {"nested": [1, {"deep": None}]}}, []),
    *("C-1042\u200b", "Ç-1042", "C\u20111042", "日本-1042", "😀"),
]
# What an approval names as its subject, and what a write names: the same, equal only in
# Python's eyes (1 == 1.0 == True, keys in another order), or a case, a space, a digit or a
# code point away.
PAIRS: list[tuple[Any, Any]] = [
    *(("C-1042", "C-1042"),) * 6,
    *((1042, 1042.0), (1, True), (True, 1.0), (0, False), (0, -0.0), (1042, "1042")),
    *((1042, 1042.5), (None, None), (None, ""), ("", ""), (0.1, 0.30000000000000004)),
    *((9007199254740993, 9007199254740992.0), (9007199254740992, 9007199254740992.0)),
    *((2**64 - 1, 1.8446744073709552e19), (INT64_MAX, 9.223372036854776e18), (10**16, 1e16)),
    *((-(2**63), -9.223372036854776e18), (2**64 - 1, 2**64 - 2)),
    *(
        ({"id": 1042}, {"id": 1042.0}),
        ({"id": True}, {"id": 1}),
        ({"a": 1, "b": 2}, {"b": 2, "a": 1}),
    ),
    *(([1, 2], [1.0, 2]), ([True], [1]), ({"id": "C-1042"}, {"id": "c-1042"}), ([], {})),
    *(
        ("C-1042", "c-1042"),
        ("C-1042", " C-1042"),
        ("C-1042", "C-1042\u200b"),
        ("C-1042", "C-2002"),
    ),
    *(("Ç-1042", "C\u0327-1042"), ("Ç-1042", "Ç-1042"), ("C\u20111042", "C-1042"), ("ß", "SS")),
    *(('it\'s "quoted"', 'it\'s "quoted"'), ("back\\slash", "back\\slash"), ("nul\x00", "nul")),
    *(("\x7f\x85\u2028", "\x7f\x85\u2028"), ("tab\t", "tab\t")),
]
# Turns of calls a run may begin with: the approval boundary passed, crossed, or crossed early
# (`>`: a call asked for in its turn, asked for again in the next and run only then).
SCRIPTS = [
    *([["lookup_customer"], ["request_approval"], ["update_account"]],) * 4,
    [["request_approval", "update_account"]],
    *([["request_approval", "update_account>"], []],) * 2,
    [["update_account"], ["request_approval"], ["update_account"]],
    [["request_approval"], ["lookup_customer", "update_email"], ["update_account"]],
    [["get_approval_status"], ["update_account", "update_account"]],
]
YEARS: list[Any] = [
    *(2020, 2021, 2019, 2019.999, 2020.0, "2021", "2019", " 2021 ", "2_021", "+2021", "2021."),
    *("inf", "-Infinity", "nan", "0x7E5", "1e3", True, None, [2021], {"y": 2021}, -(2**63)),
    *(2**64 - 1, 123456789012345678901234567890, "٢٠٢١", "２０２１", "2021\u00a0"),
]
WORDS = [
    *("ok", "done", "Change the e-mail of customer C-1042", "refund policy", "'", '"', "\\"),
    *("{not json", "[1, 2", "line\nbreak", "approved", "DENIED", " pending "),
]
UNICODE_WORDS = ["é\u0301", "日本語", "😀", "Straße", "ǅ", "\u2028", "\u00a0", "İ", "ﬁ", "Ω"]
SECRETS = [
    "sk-" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8s9T0",
    "4111 1111 1111 1111",
    "password: hunter2",
    "api_key=ZXhhbXBsZS1rZXktdmFsdWUtMTIzNDU2",
    "token is short",
]
APPROVAL_RESULTS: list[Any] = [
    *({"approved": True, "approver": "lead-7"},) * 4,
    *({"approved": False}, {"status": "denied"}, {"status": " APPROVED "}, {"status": "pending"}),
    *({"decision": "approve"}, {"decision": "Reject"}, {"approved": 1}, {"approved": "true"}),
    *({"result": {"approved": True}}, {"approved": None}, {"approved": True, "customer_id": 7}),
    *("approved", "Approved", "denied", "{'approved': True}", "[APPROVED] by lead", None),
    '{"structuredContent": {"approved": true}, "content": []}',
]


@dataclass
class Call:
    """A tool call a model asked for: its id, tool and arguments."""

    call_id: str
    tool: str
    arguments: Any
    later: bool = False  # asked for again in the next turn, and run then


class RunMaker:
    """One run of the seed's sequence: `RunMaker(seed, index).rows()` is always the same."""

    def __init__(self, seed: int, index: int) -> None:
        r = self.r = random.Random(f"{seed}/{index}")
        # Unicode in tool arguments and results, secrets, numbers of 13 digits or more (card
        # numbers, maybe): in a few runs, as the default pack's secrets rule leaves such runs
        # to Python
        self.unicode = r.random() < 0.2
        self.secrets = r.random() < 0.05
        self.big = r.random() < 0.25
        self.trace_id = f"{r.getrandbits(128) | 1:032x}"
        self.service = r.choice(SERVICES)
        self.version = r.choice(["3.1.0", "3.1.0", "3.2.0-rc1", None])
        self.agent = r.choice(AGENTS)
        self.style = r.choice(["genai", "genai", "openinference", "legacy"])
        self.subject, self.written = r.choice([p for p in PAIRS if self.fits(p)])
        self.script = [list(turn) for turn in r.choice(SCRIPTS)] if r.random() < 0.75 else []
        if self.agent == "paper-agent":
            self.script = []
        self.conversation = r.choice([None, f"conv-{index}", "thread-e11d"])
        self.out: list[dict[str, Any]] = []

    # ---- values --------------------------------------------------------------------------
    def fits(self, value: Any) -> bool:
        """Whether the value is for this run: ASCII unless the run has Unicode, only small
        numbers unless it has big ones."""
        text = json.dumps(value, ensure_ascii=False)
        return (self.unicode or text.isascii()) and (self.big or not LONG_NUMBER.search(text))

    def value_of(self, values: list[Any]) -> Any:
        """One of the values that is for this run."""
        return self.r.choice([v for v in values if self.fits(v)] or ["C-1042"])

    def text(self) -> str:
        r = self.r
        words = WORDS + UNICODE_WORDS if self.unicode else WORDS
        if self.secrets and r.random() < 0.2:
            return r.choice(SECRETS)
        return " ".join(r.choice(words) for _ in range(r.randint(0, 3)))

    def nested(self, depth: int = 0) -> Any:
        r = self.r
        if depth > 4 or r.random() < 0.35:
            return r.choice([self.text(), r.randint(-999, 999), 1.5, None, False, 0])
        if r.random() < 0.5:
            return [self.nested(depth + 1) for _ in range(r.randint(0, 3))]
        return {self.text() or "k": self.nested(depth + 1) for _ in range(r.randint(0, 3))}

    def arguments(self, tool: str) -> Any:
        """A call's arguments: mostly an object as the pack's rules read it."""
        r = self.r
        lower = tool.lower()
        subject = self.value_of(SUBJECTS)
        if r.random() < 0.8:
            subject = self.subject if "approv" in lower or r.random() < 0.3 else self.written
        if r.random() < 0.06:
            return r.choice(["C-1042", 5, [1, 2], None, "ok"])  # a one-argument tool's value
        if "approv" in lower:
            out = {
                "action": r.choice(["update_email", "close", self.text()]),
                "customer_id": subject,
            }
        elif lower.startswith(("update", "lookup", "get_account")):
            out = {"customer_id": subject, "email": self.text() or "mira@example.org"}
        elif tool == "search_papers":
            out = {"query": self.text(), "year_from": self.value_of(YEARS)}
        else:
            n = self.value_of([1, 1.0, True, -1, 2**53 + 1, -(2**63)])
            out = {"q": self.text(), "n": n, "x": self.nested()}
        if r.random() < 0.1:
            out.pop(r.choice(list(out)))
        return out

    def result(self, tool: str) -> str | None:
        """A tool's result as the decoder stores it: JSON text, or the text itself."""
        r = self.r
        if "approv" in tool.lower():
            value = r.choice(APPROVAL_RESULTS) if r.random() < 0.55 else APPROVAL_RESULTS[0]
            return value if value is None or isinstance(value, str) else self.encoded(value)
        value = self.nested()
        return r.choice(
            [
                self.encoded({"updated": True}),
                self.encoded({"customer_id": self.subject, "name": self.text(), "tier": "gold"}),
                value if isinstance(value, str) else self.encoded(value),
                self.text(),
                None,
            ]
        )

    def encoded(self, value: Any) -> str:
        """JSON text as an instrumentation writes it (kept verbatim by the decoder)."""
        if self.r.random() < 0.5:
            return json.dumps(value, ensure_ascii=self.r.random() < 0.5)
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False)

    # ---- spans ---------------------------------------------------------------------------
    def span_id(self) -> str:
        return f"{self.r.getrandbits(64) | 1:016x}"

    def row(
        self, name: str, start: int, end: int, step_kind: str, attributes: dict[str, Any], **kw: Any
    ) -> dict[str, Any]:
        """A span of the run's service (as `kw` do not say otherwise), stored."""
        row: dict[str, Any] = dict.fromkeys(ROW_KEYS)
        resource = {"service.name": self.service, "service.version": self.version}
        row.update(
            trace_id=self.trace_id,
            span_id=self.span_id(),
            flags=256,
            name=name,
            kind="INTERNAL",
            start_time_unix_nano=start,
            end_time_unix_nano=end,
            status_code="UNSET",
            resource_attributes=orjson.dumps(resource).decode(),
            scope_name="support_desk.agent_loop",
            scope_version="3.1.0",
            attributes=orjson.dumps(attributes).decode(),
            events="[]",
            links="[]",
            dropped_attributes_count=0,
            dropped_events_count=0,
            dropped_links_count=0,
            service_name=self.service,
            service_version=self.version,
            step_kind=step_kind,
            conversation_id=self.conversation,
        )
        row.update(kw)
        self.out.append(row)
        return row

    def model_call(self, start: int, parent: str, calls: list[Call]) -> dict[str, Any]:
        """A model call asking for `calls`, in the run's instrumentation's form."""
        r = self.r
        model = r.choice(MODELS)
        attrs: dict[str, Any] = {}
        asked = [(c.call_id, c.tool, c.arguments) for c in calls]
        user = [{"role": "user", "parts": [{"type": "text", "content": self.text()}]}]
        if self.style == "openinference":
            attrs["openinference.span.kind"] = "LLM"
            attrs["llm.input_messages.0.message.role"] = "user"
            attrs["llm.input_messages.0.message.content"] = self.text()
            attrs["llm.output_messages.0.message.role"] = "assistant"
            for j, (call_id, tool, arguments) in enumerate(asked):
                head = f"llm.output_messages.0.message.tool_calls.{j}.tool_call"
                attrs[f"{head}.id"] = call_id
                attrs[f"{head}.function.name"] = tool
                attrs[f"{head}.function.arguments"] = json.dumps(arguments)
        elif self.style == "legacy":
            attrs["gen_ai.operation.name"] = "chat"
            attrs["gen_ai.prompt.0.content"] = self.text()
            for j, (call_id, tool, arguments) in enumerate(asked):
                attrs[f"gen_ai.completion.0.tool_calls.{j}.id"] = call_id
                attrs[f"gen_ai.completion.0.tool_calls.{j}.name"] = tool
                attrs[f"gen_ai.completion.0.tool_calls.{j}.arguments"] = json.dumps(arguments)
        else:
            parts = [
                {"type": "tool_call", "id": call_id, "name": tool, "arguments": arguments}
                for call_id, tool, arguments in asked
            ]
            if parts and r.random() < 0.3:
                for part in parts:
                    part["arguments"] = json.dumps(part["arguments"])
            output = [{"role": "assistant", "parts": parts or [{"type": "text", "content": "ok"}]}]
            attrs["gen_ai.operation.name"] = "chat"
            attrs["gen_ai.input.messages"] = json.dumps(user, ensure_ascii=False)
            attrs["gen_ai.output.messages"] = json.dumps(output)
        tokens = [r.choice([412, 549, 0, 10**6, INT64_MAX]) for _ in range(2)]
        if r.random() > 0.05:
            tokens = [r.randint(1, 2_000), r.randint(1, 200)]
        if self.style == "openinference":
            attrs["llm.model_name"] = model
            attrs["llm.token_count.prompt"], attrs["llm.token_count.completion"] = tokens
        else:
            attrs["gen_ai.request.model"] = model
            attrs["gen_ai.usage.input_tokens"], attrs["gen_ai.usage.output_tokens"] = tokens
        return self.row(
            f"chat {model}",
            start,
            start + r.randint(SLACK, 40 * SLACK),
            "llm",
            attrs,
            parent_span_id=parent,
            kind="CLIENT",
            operation_name="chat",
            model=model,
            input_tokens=tokens[0],
            output_tokens=tokens[1],
        )

    def tool_span(self, call: Call, start: int, parent: str) -> dict[str, Any]:
        """The span of a tool call as its instrumentation writes it (OpenInference: no id)."""
        r = self.r
        arguments = call.arguments
        text = json.dumps(arguments, ensure_ascii=r.random() < 0.5)
        if not text.startswith(("{", "[", '"')):
            text = json.dumps(text)  # `5` or `null` written as text: the decoder quotes it
        result = self.result(call.tool)
        error = r.random() < 0.07
        attrs: dict[str, Any]
        call_id = call.call_id
        if self.style == "openinference" and r.random() < 0.7:
            attrs = {"openinference.span.kind": "TOOL", "tool.name": call.tool, "input.value": text}
            call_id = None
            if result is not None:
                attrs["output.value"] = result
        else:
            attrs = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": call.tool}
            attrs["gen_ai.tool.call.arguments"] = text
            if call_id is not None:
                attrs["gen_ai.tool.call.id"] = call_id
            if result is not None:
                attrs["gen_ai.tool.call.result"] = result
        if r.random() < 0.05 and "approv" in call.tool.lower():
            attrs["sextant.approval.status"] = r.choice(["Approved", "DENIED", True, 1, ""])
        if r.random() < 0.04:
            attrs["sextant.state.target"] = r.choice(["db.accounts", 3.5])
        if r.random() < 0.1:
            attrs["enduser.id"] = r.choice(["u-1", "u-2"])
        events = "[]"
        if error:
            raised = {"exception.type": "ToolError", "exception.message": self.text()}
            events = json.dumps([{"name": "exception", "attributes": raised}])
        return self.row(
            call.tool if "tool.name" in attrs else f"execute_tool {call.tool}",
            start,
            start + r.choice([1, SLACK, r.randint(SLACK, 30 * SLACK)]),
            "tool",
            attrs,
            parent_span_id=parent,
            operation_name=None if "tool.name" in attrs else "execute_tool",
            tool_name=call.tool,
            tool_call_id=call_id,
            tool_arguments=text,
            tool_result=result,
            status_code="ERROR" if error else r.choice(["UNSET", "OK"]),
            error_type="ToolError" if error else None,
            events=events,
            user_id=attrs.get("enduser.id"),
        )

    def refusal(self, tool: dict[str, Any]) -> None:
        """The guard's own refusal asked inside the tool's span: the tool did not run."""
        attrs = {
            "sextant.policy.decision": self.r.choice(["deny", "review", "allow"]),
            "sextant.policy.name": "sextant.guard",
            "sextant.guard.tool": tool["tool_name"],
        }
        start = tool["start_time_unix_nano"] + 1
        self.row("sextant.guard", start, start, "other", attrs, parent_span_id=tool["span_id"])

    def calls(self) -> list[Call]:
        """What one model turn asks for: nothing, one call or a few (written in one go)."""
        r = self.r
        kinds = [WRITES, WRITES, READS, APPROVALS, APPROVALS, OTHERS, ["request_approval"]]
        if self.agent == "paper-agent":  # the research pack's agent: searches, mostly
            kinds = [["search_papers"], ["search_papers"], ["fetch_abstract"], READS, OTHERS]
        tools = [r.choice(r.choice(kinds)) for _ in range(r.choice([0, 1, 1, 1, 2, 3]))]
        if self.script:
            tools = self.script.pop(0)
        out = []
        for tool in tools:
            name = tool.rstrip(">")
            out.append(Call(f"call_{r.getrandbits(48):012x}", name, self.arguments(name)))
            out[-1].later = tool.endswith(">")
        return out

    def rows(self) -> list[dict[str, Any]]:
        """The run: an agent span over model turns, each followed by the calls it asked for
        (one after the other or side by side), in the order an exporter might send them."""
        r = self.r
        t = BASE_TIME + r.randint(0, 10**12)
        agent = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": self.agent}
        name = f"invoke_agent {self.agent}".strip()
        root = self.row(name, t, 0, "agent", agent, agent_name=self.agent or None)
        loop = r.random() < 0.12  # the same call again and again
        carried: list[Call] = []  # asked for in the turn before, run in this one
        last: Call | None = None
        t += r.randint(SLACK, 5 * SLACK)
        for _ in range(r.randint(1, 6)):
            parent = root["span_id"]
            if r.random() < 0.1:
                t = self.sub_agent(t, parent)
                continue
            if r.random() < 0.1:
                attrs = {"openinference.span.kind": "RETRIEVER", "input.value": self.text()}
                self.row("retrieve", t, t + SLACK, "retrieval", attrs, parent_span_id=parent)
            calls = self.calls()
            if loop and last is not None:
                calls = [Call(f"call_{r.getrandbits(48):012x}", last.tool, last.arguments)]
            asked = list(calls)
            if r.random() < 0.08 and asked:
                asked.pop()  # run, never asked for
            if carried and (r.random() < 0.3 or carried[0].later):
                asked.append(carried[0])  # asked for again
            model = self.model_call(t, parent, asked)
            t = model["end_time_unix_nano"] + r.choice([0, 1, SLACK // 2, SLACK, 3 * SLACK])
            if r.random() < 0.1 and calls:
                calls[-1].later = True
            later = [c for c in calls if c.later]  # run next turn
            calls = [c for c in calls if not c.later]
            t = self.run_calls(t, parent, carried + calls)
            carried = later
            last = (calls or [last])[-1]
            # the next model call, right after (clocks disagree by a millisecond or so)
            t += r.choice([-SLACK - 1, -SLACK, -SLACK + 1, -1, 0, 1, r.randint(SLACK, 5 * SLACK)])
        root["end_time_unix_nano"] = t + SLACK
        return self.exported()

    def run_calls(self, t: int, parent: str, calls: list[Call]) -> int:
        """Run the calls (under a LangGraph `tools` node, sometimes); when the last ended."""
        r = self.r
        node = None
        if calls and r.random() < 0.15:
            first = calls[0]
            holder = {
                "tool_call": {"name": first.tool, "id": first.call_id, "args": first.arguments}
            }
            node = self.row("tools", t, 0, "other", {"input.value": json.dumps({"inputs": holder})})
            node["parent_span_id"] = parent
            parent = node["span_id"]
        side_by_side = r.random() < 0.3
        end = t
        for call in calls:
            if r.random() < 0.05:
                call.tool = r.choice(OTHERS)  # not the tool the model asked for
            span = self.tool_span(call, t, parent)
            if r.random() < 0.05:
                self.refusal(span)
            if r.random() < 0.1:
                self.mcp_call(span, r.random() < 0.5)
            end = max(end, span["end_time_unix_nano"])
            t = t + r.randint(0, SLACK) if side_by_side else span["end_time_unix_nano"] + 1
        if node is not None:
            node["end_time_unix_nano"] = end + 1
        return end

    def mcp_call(self, tool: dict[str, Any], client: bool) -> None:
        """The MCP layer under a tool's span: the SDK's client span (folded into the tool's
        step), or the CRM server's own span (another service's, in the same trace)."""
        name = tool["tool_name"]
        attrs = {"mcp.method.name": "tools/call", "gen_ai.tool.name": name}
        if client:
            attrs.update({"mcp.session.id": "s1", "server.address": "crm.internal"})
            if self.r.random() < 0.5:
                attrs["mcp.server.name"] = self.r.choice(["crm", "impostor"])
        start = tool["start_time_unix_nano"] + 1
        self.row(
            f"MCP send tools/call {name}" if client else f"tools/call {name}",
            start,
            start + self.r.choice([0, 1]),
            "tool",
            attrs,
            parent_span_id=tool["span_id"],
            kind="CLIENT" if client else "SERVER",
            service_name=self.service if client else "crm-server",
            tool_name=name,
        )

    def sub_agent(self, t: int, parent: str) -> int:
        """A handoff: another agent's turn (a model call and its calls) that ends; when."""
        r = self.r
        name = r.choice(["paper-agent", "support-agent", "Support-Agent", "helper", "bøt"])
        attrs = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": name}
        span = self.row(f"invoke_agent {name}", t, 0, "agent", attrs, agent_name=name)
        span["parent_span_id"] = parent
        calls = self.calls()
        model = self.model_call(t + 1, span["span_id"], calls)
        end = self.run_calls(model["end_time_unix_nano"] + 1, span["span_id"], calls)
        span["end_time_unix_nano"] = end + 1
        return end + 1

    def exported(self) -> list[dict[str, Any]]:
        """The rows as an exporter sends them: in the order spans ended, or any order; the
        tree broken now and then (a parent remote or never sent, a cycle)."""
        r = self.r
        spans = self.out[1:]  # not the agent's span, never in a run so far
        if r.random() < 0.05:
            r.choice(spans)["flags"] = 0x301  # its parent is remote
        if r.random() < 0.05:
            r.choice(spans)["parent_span_id"] = self.span_id()  # a parent never received
        if r.random() < 0.03 and len(spans) > 1:
            a, b = r.sample(spans, 2)
            a["parent_span_id"], b["parent_span_id"] = b["span_id"], a["span_id"]
        if r.random() < 0.03:
            span = r.choice(spans)
            span["parent_span_id"] = span["span_id"]
        if r.random() < 0.5:
            return sorted(self.out, key=lambda row: row["end_time_unix_nano"])
        shuffled = list(self.out)
        r.shuffle(shuffled)
        return shuffled


def generated_run(seed: int, index: int) -> list[dict[str, Any]]:
    """The `index`-th run of the seed's sequence (each made alone, to be made again alone)."""
    return RunMaker(seed, index).rows()
