// The official OpenAI Node SDK against a harmony model: the gpt-oss-echo test model
// (LLMR_ECHO_MODEL names it; run_sdk_tests.sh writes and serves it when gpt-oss's
// tokenizer and chat template are there, else these tests are skipped), which answers
// a chat with its last user message, so each test writes the harmony output it wants:
// reasoning and answer, one and three tool calls, plain and through the SDK's own
// stream helper (finalChatCompletion), and a tool round trip sent back as the SDK gives
// the assistant's message.
import { test } from "node:test";
import assert from "node:assert/strict";
import OpenAI from "openai";

const baseURL = process.env.LLMR_BASE_URL;
if (!baseURL) throw new Error("LLMR_BASE_URL is not set (e.g. http://127.0.0.1:8080/v1)");
const MODEL = process.env.LLMR_ECHO_MODEL;
const nodeMajor = Number(process.versions.node.split(".")[0]);
const transport = nodeMajor < 20 ? { fetch: globalThis.fetch } : {};
const client = new OpenAI({ baseURL, apiKey: "unused", maxRetries: 0, timeout: 20_000, ...transport });
const T = { timeout: 30_000, skip: MODEL ? false : "no gpt-oss-echo model here (it needs gpt-oss's tokenizer and chat template)" };

const REASON_FINAL =
  "<|channel|>analysis<|message|>User greets; reply politely.<|end|>" +
  "<|start|>assistant<|channel|>final<|message|>Hello! How can I help you today?";
const THREE_CALLS =
  "<|channel|>analysis<|message|>Three lookups.<|end|>" +
  "<|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{\"city\":\"Paris\"}<|end|>" +
  "<|start|>assistant<|channel|>commentary to=functions.get_time<|message|>{\"zone\":\"CET\"}<|end|>" +
  "<|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{\"city\":\"Oslo\"}<|call|>";
const ONE_CALL =
  "<|channel|>analysis<|message|>Need the weather.<|end|><|start|>assistant" +
  "<|channel|>commentary to=functions.get_weather<|channel|>commentary <|constrain|>json<|message|>{\"city\":\"Rome\"}<|call|>";
const tool = (name) => ({
  type: "function",
  function: { name, description: `the ${name} tool`, parameters: { type: "object", properties: {} } },
});
const TOOLS = [tool("get_weather"), tool("get_time")];
const SPECIALS = ["<|start|>", "<|end|>", "<|message|>", "<|channel|>", "<|constrain|>", "<|return|>", "<|call|>"];

const ask = (content, extra = {}) => ({ model: MODEL, messages: [{ role: "user", content }], ...extra });

function noSpecials(what, obj) {
  const text = JSON.stringify(obj);
  for (const s of SPECIALS) assert.ok(!text.includes(s), `${what}: ${s} in ${text}`);
}

// The plain answer, and the SDK's own assembly of the streamed one with the reasoning
// joined from the chunks (the helper keeps only the last piece of fields it does not
// know).
async function both(params) {
  const plain = await client.chat.completions.create(params);
  noSpecials("plain", plain);
  const stream = client.beta.chat.completions.stream({ ...params, stream: true });
  let reasoning = null;
  stream.on("chunk", (chunk) => {
    noSpecials("chunk", chunk);
    const d = chunk.choices[0]?.delta;
    if (d?.reasoning_content) reasoning = (reasoning ?? "") + d.reasoning_content;
  });
  const final = await stream.finalChatCompletion();
  return { plain: plain.choices[0], streamed: final.choices[0], reasoning };
}

const calls = (m) => (m.tool_calls ?? []).map((c) => [c.type, c.function.name, c.function.arguments]);

test("a reasoning and an answer come apart, plain and streamed", T, async () => {
  const { plain, streamed, reasoning } = await both(ask(REASON_FINAL));
  assert.equal(plain.message.content, "Hello! How can I help you today?");
  assert.equal(plain.message.reasoning_content, "User greets; reply politely.");
  assert.equal(plain.message.reasoning, "User greets; reply politely.");
  assert.equal(plain.finish_reason, "stop");
  assert.equal(streamed.message.content, plain.message.content);
  assert.equal(reasoning, plain.message.reasoning_content);
  assert.equal(streamed.finish_reason, "stop");
  assert.equal(streamed.message.tool_calls, undefined);
});

test("one tool call, its name glued to a special token", T, async () => {
  const { plain, streamed } = await both(ask(ONE_CALL, { tools: TOOLS }));
  assert.equal(plain.finish_reason, "tool_calls");
  assert.equal(plain.message.content, null);
  assert.deepEqual(calls(plain.message), [["function", "get_weather", "{\"city\":\"Rome\"}"]]);
  assert.match(plain.message.tool_calls[0].id, /^call_/);
  assert.equal(streamed.finish_reason, "tool_calls");
  assert.equal(streamed.message.content, null);
  assert.deepEqual(calls(streamed.message), calls(plain.message));
});

test("three tool calls in one turn", T, async () => {
  const { plain, streamed } = await both(ask(THREE_CALLS, { tools: TOOLS }));
  const want = [
    ["function", "get_weather", "{\"city\":\"Paris\"}"],
    ["function", "get_time", "{\"zone\":\"CET\"}"],
    ["function", "get_weather", "{\"city\":\"Oslo\"}"],
  ];
  assert.deepEqual(calls(plain.message), want);
  assert.deepEqual(calls(streamed.message), want);
  assert.equal(new Set(streamed.message.tool_calls.map((c) => c.id)).size, 3);
  assert.equal(streamed.finish_reason, "tool_calls");
});

test("a tool round trip: the assistant's message goes back as the SDK gave it", T, async () => {
  const first = await client.chat.completions.create(ask(THREE_CALLS, { tools: TOOLS }));
  const message = first.choices[0].message;
  const messages = [
    { role: "user", content: "Weather in Paris and Oslo, and the time?" },
    message,
    ...message.tool_calls.map((c, i) => ({ role: "tool", tool_call_id: c.id, content: `result ${i}` })),
    { role: "user", content: "Thanks! Summarise." },
  ];
  const r = await client.chat.completions.create({ model: MODEL, messages, tools: TOOLS });
  assert.equal(r.choices[0].message.content, "Thanks! Summarise.");
});
