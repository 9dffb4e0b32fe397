// One support-desk agent run, a hand-written loop instrumented by hand with the OTel GenAI
// semantic conventions, exported by the official Node.js OTLP/gRPC exporter. The model is
// scripted in-process; tool calls asked for in one model turn run one after the other.
// Driven by record_support.py (--family node_sdk-genai_semconv), which passes the run as JSON:
//   node support_loop.mjs '{"endpoint": "127.0.0.1:4317", "input": ..., "turns": [...],
//                           "results": {"<name> <arguments JSON>": "<result>"}, ...}'
// Run it from a directory whose node_modules holds the packages listed in
// tests/testdata/otlp-captures/README.md.
import { randomBytes, randomUUID } from "node:crypto";
import { context, trace, SpanKind } from "@opentelemetry/api";
import { OTLPTraceExporter } from "@opentelemetry/exporter-trace-otlp-grpc";
import { resourceFromAttributes } from "@opentelemetry/resources";
import { BatchSpanProcessor } from "@opentelemetry/sdk-trace-base";
import { NodeTracerProvider } from "@opentelemetry/sdk-trace-node";

const spec = JSON.parse(process.argv[2]);
const MODEL = "gpt-4.1-mini";
const RESPONSE_MODEL = "gpt-4.1-mini-2025-04-14";
const SYSTEM = "You handle customer account requests. Use the tools.";
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

const provider = new NodeTracerProvider({
  resource: resourceFromAttributes({
    "service.name": "support-desk",
    "service.version": "3.1.0",
    "deployment.environment.name": "staging",
  }),
  mergeResourceWithDefaults: false,
  spanProcessors: [
    new BatchSpanProcessor(new OTLPTraceExporter({ url: `http://${spec.endpoint}` })),
  ],
});
provider.register();
const tracer = provider.getTracer("support_desk.agent_loop", "3.1.0");

function usage(n, turn) {
  const output = typeof turn === "string" ? 46 + Math.floor(turn.length / 16) : 17 * turn.length + 5;
  return [412 + 137 * n, output];
}

async function model(n) {
  await sleep(30);
  const turn = spec.turns[n];
  const [input, output] = usage(n, turn);
  const calls =
    typeof turn === "string"
      ? []
      : turn.map(([name, args]) => ({
          id: "call_" + randomBytes(12).toString("base64url").slice(0, 16),
          name,
          arguments: args,
        }));
  return {
    id: "chatcmpl-" + randomBytes(14).toString("hex"),
    text: typeof turn === "string" ? turn : null,
    calls,
    input,
    output,
  };
}

const conversation = randomUUID();
const system = JSON.stringify([{ type: "text", content: SYSTEM }]);
const history = [{ role: "user", parts: [{ type: "text", content: spec.input }] }];
const root = tracer.startSpan("invoke_agent support-agent", {
  attributes: {
    "gen_ai.operation.name": "invoke_agent",
    "gen_ai.provider.name": "openai",
    "gen_ai.agent.name": "support-agent",
    "gen_ai.agent.id": "asst_support_agent",
    "gen_ai.agent.description": SYSTEM,
    "gen_ai.request.model": MODEL,
    "gen_ai.conversation.id": conversation,
    "gen_ai.system_instructions": system,
    "gen_ai.input.messages": JSON.stringify(history),
  },
});
const inside = trace.setSpan(context.active(), root);
let totals = [0, 0];
for (let n = 0; ; n++) {
  const chat = tracer.startSpan(
    `chat ${MODEL}`,
    {
      kind: SpanKind.CLIENT,
      attributes: {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "openai",
        "gen_ai.request.model": MODEL,
        "gen_ai.request.temperature": 0,
        "server.address": "api.openai.com",
        "server.port": 443,
        "gen_ai.conversation.id": conversation,
        "gen_ai.system_instructions": system,
        "gen_ai.input.messages": JSON.stringify(history),
      },
    },
    inside,
  );
  const reply = await model(n);
  const finish = reply.calls.length ? "tool_call" : "stop";
  const parts = reply.calls.length
    ? reply.calls.map((c) => ({ type: "tool_call", id: c.id, name: c.name, arguments: c.arguments }))
    : [{ type: "text", content: reply.text }];
  const out = { role: "assistant", parts, finish_reason: finish };
  chat.setAttributes({
    "gen_ai.response.id": reply.id,
    "gen_ai.response.model": RESPONSE_MODEL,
    "gen_ai.response.finish_reasons": [finish],
    "gen_ai.usage.input_tokens": reply.input,
    "gen_ai.usage.output_tokens": reply.output,
    "gen_ai.output.messages": JSON.stringify([out]),
  });
  chat.end();
  totals = [totals[0] + reply.input, totals[1] + reply.output];
  history.push({ role: "assistant", parts });
  if (!reply.calls.length) {
    root.setAttributes({
      "gen_ai.response.model": RESPONSE_MODEL,
      "gen_ai.usage.input_tokens": totals[0],
      "gen_ai.usage.output_tokens": totals[1],
      "gen_ai.output.messages": JSON.stringify([out]),
    });
    break;
  }
  for (const c of reply.calls) {
    const args = JSON.stringify(c.arguments);
    const tool = tracer.startSpan(
      `execute_tool ${c.name}`,
      {
        attributes: {
          "gen_ai.operation.name": "execute_tool",
          "gen_ai.tool.name": c.name,
          "gen_ai.tool.call.id": c.id,
          "gen_ai.tool.type": "function",
          "gen_ai.tool.description": spec.descriptions[c.name],
          "gen_ai.tool.call.arguments": args,
        },
      },
      inside,
    );
    await sleep(10);
    const result = spec.results[`${c.name} ${args}`];
    tool.setAttribute("gen_ai.tool.call.result", result);
    tool.end();
    history.push({ role: "tool", parts: [{ type: "tool_call_response", id: c.id, response: result }] });
  }
}
root.end();
await provider.shutdown();
