// The official OpenAI Node SDK's Responses API (client.responses) against the
// gpt-oss-echo test model (LLMR_ECHO_MODEL names it; skipped without it), which answers
// with the last user message, so each test writes the harmony output it wants:
// reasoning and answer plain and streamed (create with stream: true, and the SDK's
// stream helper responses.stream(...).finalResponse()), a function tool's call, and a
// follow-up with previous_response_id (through a router, LLMR_SDK_MODE=router; a node
// alone refuses it with a 400).
import { test } from "node:test";
import assert from "node:assert/strict";
import OpenAI from "openai";

const baseURL = process.env.LLMR_BASE_URL;
if (!baseURL) throw new Error("LLMR_BASE_URL is not set (e.g. http://127.0.0.1:8080/v1)");
const MODEL = process.env.LLMR_ECHO_MODEL;
const ROUTER = process.env.LLMR_SDK_MODE === "router";
const nodeMajor = Number(process.versions.node.split(".")[0]);
const transport = nodeMajor < 20 ? { fetch: globalThis.fetch } : {};
const client = new OpenAI({ baseURL, apiKey: "unused", maxRetries: 0, timeout: 20_000, ...transport });
const T = { timeout: 30_000, skip: MODEL ? false : "no gpt-oss-echo model here (it needs gpt-oss's tokenizer and chat template)" };

const REASON_FINAL =
  "<|channel|>analysis<|message|>User greets; reply politely.<|end|>" +
  "<|start|>assistant<|channel|>final<|message|>Hello! How can I help you today?";
const CALL =
  "<|channel|>analysis<|message|>Need the weather.<|end|><|start|>assistant" +
  "<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{\"city\":\"Rome\"}<|call|>";
const WEATHER = {
  type: "function", name: "get_weather", description: "the weather", strict: false,
  parameters: { type: "object", properties: { city: { type: "string" } } },
};

function reasoningOf(resp) {
  return resp.output.filter((i) => i.type === "reasoning").map((i) => i.content[0].text).join("");
}

test("responses.create: reasoning and answer apart, output_text the answer", T, async () => {
  const r = await client.responses.create({ model: MODEL, input: REASON_FINAL, instructions: "Be kind." });
  assert.equal(r.object, "response");
  assert.equal(r.status, "completed");
  assert.equal(r.output_text, "Hello! How can I help you today?");
  assert.equal(reasoningOf(r), "User greets; reply politely.");
  assert.ok(r.usage.output_tokens > 0 && r.usage.output_tokens_details.reasoning_tokens > 0);
});

test("responses.create stream: true gives the typed events; joined, the plain answer", T, async () => {
  const stream = await client.responses.create({ model: MODEL, input: REASON_FINAL, stream: true });
  let text = "", reasoning = "", completed = null;
  const types = [];
  for await (const ev of stream) {
    types.push(ev.type);
    if (ev.type === "response.output_text.delta") text += ev.delta;
    if (ev.type === "response.reasoning_text.delta") reasoning += ev.delta;
    if (ev.type === "response.completed") completed = ev.response;
  }
  assert.equal(types[0], "response.created");
  assert.equal(types.at(-1), "response.completed");
  assert.equal(text, "Hello! How can I help you today?");
  assert.equal(reasoning, "User greets; reply politely.");
  assert.equal(reasoningOf(completed), reasoning);
});

test("responses.stream(...).finalResponse() assembles a function call", T, async () => {
  const stream = client.responses.stream({ model: MODEL, input: CALL, tools: [WEATHER] });
  let args = "";
  stream.on("response.function_call_arguments.delta", (ev) => { args = ev.snapshot; });
  const r = await stream.finalResponse();
  const calls = r.output.filter((i) => i.type === "function_call");
  assert.equal(calls.length, 1);
  assert.equal(calls[0].name, "get_weather");
  assert.equal(calls[0].arguments, "{\"city\":\"Rome\"}");
  assert.equal(args, calls[0].arguments);
  assert.match(calls[0].call_id, /^call_/);
});

test("a follow-up with previous_response_id", T, async () => {
  const first = await client.responses.create({ model: MODEL, input: CALL, tools: [WEATHER] });
  const call = first.output.find((i) => i.type === "function_call");
  const follow = {
    model: MODEL, tools: [WEATHER], previous_response_id: first.id,
    input: [
      { type: "function_call_output", call_id: call.call_id, output: "sunny" },
      { role: "user", content: "<|channel|>final<|message|>It is sunny in Rome." },
    ],
  };
  if (!ROUTER) {
    await assert.rejects(client.responses.create(follow), (e) => e.status === 400 && /previous_response_id/.test(e.message));
    return;
  }
  const second = await client.responses.create(follow);
  assert.equal(second.output_text, "It is sunny in Rome.");
  // the prompt holds the first turn (its input and call) and the tool's output
  assert.ok(second.usage.input_tokens > first.usage.input_tokens + 10, "the earlier turn is in the prompt");
  const got = await client.responses.retrieve(second.id);
  assert.equal(got.id, second.id);
  await client.responses.del(second.id);
  await assert.rejects(client.responses.retrieve(second.id), (e) => e.status === 404);
});
