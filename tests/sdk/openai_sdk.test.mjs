// The official OpenAI Node SDK against a running llmr node serving the loopback test
// model "loop" (run_sdk_tests.sh starts the node and sets LLMR_BASE_URL to its /v1).
// The loopback model is deterministic and never emits its end token by itself, so a
// generation runs to max_tokens ("length") unless a stop string ends it.
import { test } from "node:test";
import assert from "node:assert/strict";
import OpenAI from "openai";

const baseURL = process.env.LLMR_BASE_URL;
if (!baseURL) throw new Error("LLMR_BASE_URL is not set (e.g. http://127.0.0.1:8080/v1)");

// On Node.js 18 the SDK is given the runtime's own fetch instead of its default
// transport (node-fetch 2 over a keep-alive agent): with Debian's Node.js 18 security
// update (18.20.4+dfsg-1~deb12u3) that transport fails every chunked response
// ("Premature close") whatever the server sends, a plain Node.js server included.
const nodeMajor = Number(process.versions.node.split(".")[0]);
const transport = nodeMajor < 20 ? { fetch: globalThis.fetch } : {};
// No retries: a failure must show at once, not after the SDK's backoff.
const client = new OpenAI({ baseURL, apiKey: "unused", maxRetries: 0, timeout: 20_000, ...transport });
const MODEL = "loop";
const T = { timeout: 30_000 };

const chatRequest = {
  model: MODEL,
  messages: [
    { role: "system", content: "You are a test." },
    { role: "user", content: "Say something." },
  ],
  max_tokens: 8,
  temperature: 0,
};
const completionRequest = { model: MODEL, prompt: "Once upon a time", max_tokens: 8, temperature: 0 };

function checkUsage(usage, completionTokens) {
  assert.ok(usage, "usage is present");
  assert.equal(usage.completion_tokens, completionTokens, "completion_tokens");
  assert.ok(Number.isInteger(usage.prompt_tokens) && usage.prompt_tokens > 0,
    `prompt_tokens > 0 (got ${usage.prompt_tokens})`);
  assert.equal(usage.total_tokens, usage.prompt_tokens + usage.completion_tokens, "total_tokens");
}

// Reads a whole stream; returns the chunks.
async function collect(stream) {
  const chunks = [];
  for await (const chunk of stream) chunks.push(chunk);
  return chunks;
}

test("models.list() lists the loopback model", T, async () => {
  const page = await client.models.list();
  const ids = page.data.map((m) => m.id);
  assert.ok(ids.includes(MODEL), `"${MODEL}" in ${JSON.stringify(ids)}`);
  const loop = page.data.find((m) => m.id === MODEL);
  assert.equal(loop.object, "model");
  assert.equal(typeof loop.created, "number");
  assert.equal(typeof loop.owned_by, "string");
});

test("models.retrieve() gives the loopback model; an unknown id is a 404", T, async () => {
  const m = await client.models.retrieve(MODEL);
  assert.equal(m.id, MODEL);
  assert.equal(m.object, "model");
  assert.equal(typeof m.created, "number");
  assert.equal(typeof m.owned_by, "string");
  const listed = (await client.models.list()).data.find((x) => x.id === MODEL);
  assert.deepEqual({ ...m }, { ...listed }, "retrieve answers what the list says");
  await assert.rejects(client.models.retrieve("no-such-model"), (err) => {
    assert.ok(err instanceof OpenAI.NotFoundError, `a NotFoundError (got ${err?.constructor?.name}: ${err})`);
    assert.equal(err.code, "model_not_found");
    return true;
  });
});

test("chat.completions.create: a plain completion", T, async () => {
  const r = await client.chat.completions.create(chatRequest);
  assert.equal(r.object, "chat.completion");
  assert.equal(typeof r.id, "string");
  assert.equal(r.model, MODEL);
  assert.equal(r.choices.length, 1);
  const c = r.choices[0];
  assert.equal(c.index, 0);
  assert.equal(c.message.role, "assistant");
  assert.equal(typeof c.message.content, "string");
  assert.equal(c.finish_reason, "length");
  checkUsage(r.usage, 8);
});

test("chat at temperature 0 is repeatable", T, async () => {
  const a = await client.chat.completions.create(chatRequest);
  const b = await client.chat.completions.create(chatRequest);
  assert.equal(a.choices[0].message.content, b.choices[0].message.content);
});

test("chat streamed: the deltas make the plain text", T, async () => {
  const plain = await client.chat.completions.create(chatRequest);
  const chunks = await collect(await client.chat.completions.create({ ...chatRequest, stream: true }));
  assert.ok(chunks.length >= 2, `at least two chunks (got ${chunks.length})`);
  for (const ch of chunks) {
    assert.equal(ch.object, "chat.completion.chunk");
    assert.equal(ch.id, chunks[0].id, "one id for the whole stream");
    assert.ok(ch.usage == null, "no usage without stream_options.include_usage");
  }
  assert.equal(chunks[0].choices[0].delta.role, "assistant", "the first delta has the role");
  const text = chunks.map((ch) => ch.choices[0]?.delta?.content ?? "").join("");
  assert.equal(text, plain.choices[0].message.content);
  const finishes = chunks.map((ch) => ch.choices[0]?.finish_reason).filter((f) => f != null);
  assert.deepEqual(finishes, ["length"], "exactly one chunk has a finish_reason");
  assert.equal(chunks.at(-1).choices[0].finish_reason, "length", "the last chunk has it");
});

test("chat streamed with stream_options.include_usage: a usage chunk", T, async () => {
  const chunks = await collect(await client.chat.completions.create({
    ...chatRequest, stream: true, stream_options: { include_usage: true },
  }));
  const last = chunks.at(-1);
  assert.deepEqual(last.choices, [], "the usage chunk has no choices");
  checkUsage(last.usage, 8);
  for (const ch of chunks.slice(0, -1)) assert.ok(ch.usage == null, "usage only on the last chunk");
  assert.ok(chunks.some((ch) => ch.choices[0]?.finish_reason === "length"), "a finish_reason chunk");
});

test("completions.create: plain and streamed give the same text", T, async () => {
  const r = await client.completions.create(completionRequest);
  assert.equal(r.object, "text_completion");
  assert.equal(r.model, MODEL);
  assert.equal(r.choices.length, 1);
  assert.equal(typeof r.choices[0].text, "string");
  assert.equal(r.choices[0].finish_reason, "length");
  checkUsage(r.usage, 8);

  const chunks = await collect(await client.completions.create({
    ...completionRequest, stream: true, stream_options: { include_usage: true },
  }));
  const text = chunks.map((ch) => ch.choices[0]?.text ?? "").join("");
  assert.equal(text, r.choices[0].text);
  assert.ok(chunks.some((ch) => ch.choices[0]?.finish_reason === "length"), "a finish_reason chunk");
  checkUsage(chunks.at(-1).usage, 8);
});

test("chat logprobs: one entry per token with two alternatives", T, async () => {
  const r = await client.chat.completions.create({ ...chatRequest, logprobs: true, top_logprobs: 2 });
  const content = r.choices[0].logprobs?.content;
  assert.ok(Array.isArray(content), "choices[0].logprobs.content is an array");
  assert.equal(content.length, r.usage.completion_tokens, "one entry per completion token");
  for (const e of content) {
    assert.equal(typeof e.token, "string");
    assert.equal(typeof e.logprob, "number");
    assert.ok(e.logprob <= 0, `logprob <= 0 (got ${e.logprob})`);
    assert.equal(e.top_logprobs.length, 2);
    for (const t of e.top_logprobs) {
      assert.equal(typeof t.token, "string");
      assert.equal(typeof t.logprob, "number");
    }
  }
  // Without logprobs asked for, none are sent.
  const plain = await client.chat.completions.create(chatRequest);
  assert.ok(plain.choices[0].logprobs == null, "no logprobs unless asked");
});

test("completions logprobs: tokens, token_logprobs and top_logprobs", T, async () => {
  const r = await client.completions.create({ ...completionRequest, logprobs: 2 });
  const lp = r.choices[0].logprobs;
  assert.ok(lp, "choices[0].logprobs is present");
  assert.equal(lp.tokens.length, 8);
  assert.equal(lp.token_logprobs.length, 8);
  assert.equal(lp.top_logprobs.length, 8);
  for (const top of lp.top_logprobs) assert.ok(Object.keys(top).length >= 1 && Object.keys(top).length <= 2);
});

test("a stop string ends the chat with finish_reason stop", T, async (t) => {
  const long = await client.chat.completions.create({ ...chatRequest, max_tokens: 32 });
  const text = long.choices[0].message.content;
  // A stop string from the middle of the text: the first two printable ASCII
  // characters after the start that are not whitespace.
  const m = /[!-~]{2}/.exec(text.slice(1));
  if (!m) {
    // The loopback table decides the text; without such a pair there is no stop to try.
    t.skip(`no printable pair in ${JSON.stringify(text)}`);
    return;
  }
  const stop = m[0];
  const at = text.indexOf(stop);
  const r = await client.chat.completions.create({ ...chatRequest, max_tokens: 32, stop: [stop] });
  assert.equal(r.choices[0].finish_reason, "stop");
  assert.equal(r.choices[0].message.content, text.slice(0, at), "the text ends before the stop string");
});

test("errors: an unknown model is a 404 with code model_not_found", T, async () => {
  await assert.rejects(
    client.chat.completions.create({ ...chatRequest, model: "no-such-model" }),
    (err) => {
      assert.ok(err instanceof OpenAI.APIError, `an APIError (got ${err?.constructor?.name}: ${err})`);
      assert.ok(err instanceof OpenAI.NotFoundError, "a NotFoundError");
      assert.equal(err.status, 404);
      assert.equal(err.error?.code, "model_not_found");
      assert.equal(err.code, "model_not_found");
      assert.equal(typeof err.error?.message, "string");
      assert.ok(err.error.message.length > 0, "the error has a message");
      return true;
    });
});

test("errors: max_tokens -1 is a 400", T, async () => {
  await assert.rejects(
    client.chat.completions.create({ ...chatRequest, max_tokens: -1 }),
    (err) => {
      assert.ok(err instanceof OpenAI.BadRequestError, `a BadRequestError (got ${err?.constructor?.name}: ${err})`);
      assert.equal(err.status, 400);
      assert.equal(err.param, "max_tokens");
      assert.equal(err.code, "invalid_value");
      return true;
    });
});
