// The dashboard in a real browser (Debian's chromium through playwright-core) against
// a real `llmr serve` that run_dashboard_tests.sh started.  At 1280×800: sign-in with
// a wrong key and the admin key, the live indicator, the local node's card, a refused
// and an accepted model registration, a streamed chat of two turns, a stopped one and a
// rendered prompt in the playground, a key created (its secret shown once) and revoked,
// the request log, a chat with the gpt-oss-echo model (reasoning folded apart from the
// answer, a tool call shown as a call, markdown, the whole history sent, no special
// token's text on the page), the charts.  At 390×844: every page fits the width.  On every page, at both sizes, the
// browser console stays free of errors and warnings and no exception escapes.
// Screenshots of every page at both sizes go to LLMR_DASHBOARD_ARTIFACTS.
//
// Environment (set by the runner): LLMR_DASHBOARD_URL (the router's base URL),
// LLMR_DASHBOARD_ADMIN_KEY, LLMR_DASHBOARD_LOOP_DIR (a loopback model directory),
// LLMR_DASHBOARD_BAD_DIR (the same without tokenizer.json), LLMR_DASHBOARD_ECHO_DIR (a
// gpt-oss-echo model directory; empty when gpt-oss's tokenizer is not here, and its test
// is then skipped), LLMR_DASHBOARD_ARTIFACTS, CHROMIUM (the browser).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import path from 'node:path';
import { chromium } from 'playwright-core';

const env = (name) => {
  const v = process.env[name];
  if (!v) throw new Error(`${name} is not set: run this through run_dashboard_tests.sh`);
  return v;
};
const BASE = env('LLMR_DASHBOARD_URL');
const ADMIN = env('LLMR_DASHBOARD_ADMIN_KEY');
const LOOP_DIR = env('LLMR_DASHBOARD_LOOP_DIR');
const BAD_DIR = env('LLMR_DASHBOARD_BAD_DIR');
const ARTIFACTS = env('LLMR_DASHBOARD_ARTIFACTS');
const CHROMIUM = env('CHROMIUM');
const LOOP = path.basename(LOOP_DIR);
const ECHO_DIR = process.env.LLMR_DASHBOARD_ECHO_DIR || '';

const PAGES = ['nodes', 'models', 'keys', 'requests', 'charts', 'playground'];
const tid = (id) => `[data-testid="${id}"]`;

let browser;

// ---- console watch --------------------------------------------------------------------
// Every console error or warning and every uncaught exception fails the step that saw
// it, except the browser's own line for an HTTP error the step provoked on purpose
// (allow() names it, once).
function watch(page, label) {
  const w = { problems: [], allowed: [] };
  page.on('console', (msg) => {
    const type = msg.type();
    if (type !== 'error' && type !== 'warning') return;
    const text = msg.text();
    const i = w.allowed.findIndex((re) => re.test(text));
    if (i >= 0) {
      w.allowed.splice(i, 1);
      return;
    }
    const loc = msg.location();
    w.problems.push(`${label}: console ${type}: ${text}${loc && loc.url ? ` (${loc.url}:${loc.lineNumber})` : ''}`);
  });
  page.on('pageerror', (err) => w.problems.push(`${label}: uncaught exception: ${err.stack || err.message}`));
  page.on('crash', () => w.problems.push(`${label}: the page crashed`));
  w.allow = (status) => w.allowed.push(new RegExp(`status of ${status}\\b`));
  w.check = (where) => {
    const p = w.problems.splice(0);
    assert.deepEqual(p, [], `console problems ${where}:\n${p.join('\n')}`);
  };
  return w;
}

async function shot(page, name) {
  await page.screenshot({ path: path.join(ARTIFACTS, `${name}.png`), fullPage: true });
}

async function textOf(page, selector) {
  return ((await page.locator(selector).first().textContent()) || '').trim();
}

// The text of the last element that matches selector ('' when there is none).
async function lastText(page, selector) {
  const all = page.locator(selector);
  return (await all.count()) ? ((await all.last().textContent()) || '').trim() : '';
}

async function signIn(page) {
  await page.goto(`${BASE}/dashboard`);
  await page.locator(tid('signin-key')).fill(ADMIN);
  await page.locator(tid('signin-submit')).click();
  await page.locator(tid('live-status')).filter({ hasText: /^live$/ }).waitFor({ timeout: 15000 });
}

before(async () => {
  browser = await chromium.launch({ executablePath: CHROMIUM, headless: true });
});

after(async () => {
  if (browser) await browser.close();
});

// ---- 1280×800 ---------------------------------------------------------------------------
let desk;
let dw;
let signedIn = false;
let loopReady = false;

function needSignIn(t) {
  if (!signedIn) {
    t.skip('sign-in failed above');
    return false;
  }
  return true;
}

// Until the select `sel` offers `name`.  The page may not have drawn the select yet (a
// page just opened): the check waits for it instead of throwing, which the page would
// report as an uncaught exception.
async function waitForOption(page, sel, name, timeout) {
  await page.waitForFunction(
    ([s, n]) => {
      const select = document.querySelector(s);
      return !!select && [...select.options].some((o) => o.value === n);
    },
    [sel, name],
    { timeout }
  );
}

async function go(page, id) {
  await page.locator(tid(`nav-${id}`)).click();
  await page.waitForFunction((h) => location.hash === h, `#/${id}`);
}

test('desktop: a wrong key is refused with a message', async () => {
  const ctx = await browser.newContext({
    viewport: { width: 1280, height: 800 },
    permissions: ['clipboard-read', 'clipboard-write'],
  });
  desk = await ctx.newPage();
  dw = watch(desk, '1280×800');
  await desk.goto(`${BASE}/dashboard`);
  await desk.locator(tid('signin-key')).waitFor();
  await shot(desk, 'desktop-signin');
  dw.allow(401);
  await desk.locator(tid('signin-key')).fill('llmr-not-a-key-0123456789');
  await desk.locator(tid('signin-submit')).click();
  const err = desk.locator(tid('signin-error'));
  await err.waitFor({ state: 'visible', timeout: 10000 });
  assert.match(await err.textContent(), /wrong key|401/i);
  await shot(desk, 'desktop-signin-error');
  dw.check('on the sign-in page');
});

test('desktop: the admin key signs in and the live indicator says live', async () => {
  await desk.locator(tid('signin-key')).fill(ADMIN);
  await desk.locator(tid('signin-submit')).click();
  await desk.locator(tid('live-status')).filter({ hasText: /^live$/ }).waitFor({ timeout: 15000 });
  assert.equal(await textOf(desk, tid('live-status')), 'live');
  signedIn = true;
  dw.check('after sign-in');
});

test('desktop: the local node is online', async (t) => {
  if (!needSignIn(t)) return;
  await go(desk, 'nodes');
  const card = desk.locator(tid('node-card')).filter({ hasText: 'local' }).first();
  await card.waitFor({ timeout: 15000 });
  assert.ok(await card.getAttribute('data-node-id'), 'the card names its node id');
  await card.locator(tid('node-status')).filter({ hasText: /^online$/ }).waitFor({ timeout: 15000 });
  assert.notEqual(await textOf(card, tid('node-gpu')), '', 'the GPU line is not empty');
  for (const id of ['node-vram-bar', 'node-ram-bar', 'node-models', 'node-inflight', 'node-tps'])
    assert.equal(await card.locator(tid(id)).count(), 1, `the card has ${id}`);
  const ram = Number(await card.locator(tid('node-ram-bar')).getAttribute('aria-valuenow'));
  assert.ok(ram > 0 && ram <= 100, `the RAM bar shows the memory in use (${ram}%)`);
  await shot(desk, 'desktop-nodes');
  dw.check('on the nodes page');
});

test('desktop: a directory without tokenizer.json is refused, naming it', async (t) => {
  if (!needSignIn(t)) return;
  await go(desk, 'models');
  await desk.locator(tid('register-kind')).selectOption('path');
  await desk.locator(tid('register-source')).fill(BAD_DIR);
  await desk.locator(tid('register-format')).selectOption('safetensors');
  dw.allow(400);
  await desk.locator(tid('register-submit')).click();
  const err = desk.locator(tid('register-error'));
  await err.waitFor({ state: 'visible', timeout: 15000 });
  const message = (await err.textContent()) || '';
  const files = await desk.locator(`${tid('register-error-files')} li`).allTextContents();
  assert.ok(
    message.includes('tokenizer.json') || files.some((f) => f.includes('tokenizer.json')),
    `the refusal names tokenizer.json: message ${JSON.stringify(message)}, files ${JSON.stringify(files)}`
  );
  await shot(desk, 'desktop-models-refused');
  dw.check('after the refused registration');
});

test('desktop: the loopback model registers and becomes ready', async (t) => {
  if (!needSignIn(t)) return;
  await desk.locator(tid('register-kind')).selectOption('path');
  await desk.locator(tid('register-source')).fill(LOOP_DIR);
  await desk.locator(tid('register-format')).selectOption('safetensors');
  await desk.locator(tid('register-submit')).click();
  const row = desk.locator(`${tid('model-row')}[data-model="${LOOP}"]`);
  await row.waitFor({ timeout: 15000 });
  await row.locator(tid('model-ready')).filter({ hasText: /^ready$/ }).waitFor({ timeout: 60000 });
  assert.equal(await desk.locator(tid('register-error')).count(), 0, 'no error is left shown');
  for (const id of ['model-reason', 'model-sync', 'model-delete'])
    assert.equal(await row.locator(tid(id)).count(), 1, `the row has ${id}`);
  loopReady = true;
  await shot(desk, 'desktop-models');
  dw.check('on the models page');
});

test('desktop: the playground streams a chat of two turns, stops one, and shows the rendered prompt', async (t) => {
  if (!needSignIn(t)) return;
  if (!loopReady) return t.skip('the loopback model is not ready');
  await go(desk, 'playground');
  await waitForOption(desk, tid('pg-model'), LOOP, 15000);
  await desk.locator(tid('pg-model')).selectOption(LOOP);
  await desk.locator(tid('pg-temperature')).fill('0');
  await desk.locator(tid('pg-max-tokens')).fill('100');
  await desk.locator(tid('pg-system')).fill('You are a test.');
  await desk.locator(tid('pg-message')).fill('Tell me a long story about routers.');
  // The node paces the loopback engine's tokens (run_dashboard_tests.sh sets a 20 ms
  // delay), so the answer must reach the output token by token: it grows in steps.
  // Every length pg-output's text takes, as the DOM changes.
  const observe = () =>
    desk.evaluate((sel) => {
      const el = document.querySelector(sel);
      window.__lengths = [];
      if (window.__observer) window.__observer.disconnect();
      window.__observer = new MutationObserver(() => window.__lengths.push(el.textContent.length));
      window.__observer.observe(el, { subtree: true, childList: true, characterData: true });
    }, tid('pg-output'));
  const sendDone = () =>
    desk.waitForFunction((sel) => !document.querySelector(sel).disabled, tid('pg-send'), { timeout: 30000 });
  await observe();
  await desk.locator(tid('pg-send')).click();
  await sendDone();
  const lengths = await desk.evaluate(() => window.__lengths);
  const output = await lastText(desk, tid('pg-answer'));
  const steps = [...new Set(lengths.filter((n) => n > 0))];
  assert.ok(output.length > 0, 'the answer is not empty');
  assert.equal(await desk.locator(tid('pg-message')).inputValue(), '', 'the message box is emptied by Send');
  assert.equal(await desk.locator(`${tid('pg-turn')}[data-role="user"]`).count(), 1, 'one user turn');
  assert.equal(await desk.locator(`${tid('pg-turn')}[data-role="assistant"]`).count(), 1, 'one assistant turn');
  assert.equal(await textOf(desk, tid('pg-error')), '', 'no error shown');
  assert.ok(steps.length >= 10, `the output grew in ${steps.length} step(s) (lengths seen: ${lengths.join(', ')})`);
  t.diagnostic(`the streamed output grew in ${steps.length} steps to ${output.length} characters`);
  assert.ok(await desk.locator(tid('pg-stop')).isDisabled(), 'Stop is disabled once the stream ended');

  // A second turn, stopped: a long answer cut short once it has begun.  Shift+Enter
  // writes a newline; Enter sends.
  await desk.locator(tid('pg-max-tokens')).fill('2000');
  await desk.locator(tid('pg-message')).fill('And another');
  await desk.locator(tid('pg-message')).press('Shift+Enter');
  await desk.locator(tid('pg-message')).type('one.');
  assert.equal(await desk.locator(tid('pg-message')).inputValue(), 'And another\none.', 'Shift+Enter is a newline');
  assert.ok(await desk.locator(tid('pg-stop')).isDisabled(), 'Shift+Enter sent nothing');
  await desk.locator(tid('pg-message')).press('Enter');
  const answers = `${tid('pg-turn')}[data-role="assistant"]`;
  await desk.waitForFunction(
    (sel) => {
      const turns = document.querySelectorAll(sel);
      const a = turns.length === 2 && turns[1].querySelector('[data-testid="pg-answer"]');
      return a && a.textContent.length > 0;
    },
    answers,
    { timeout: 15000 }
  );
  await desk.locator(tid('pg-stop')).click();
  await sendDone();
  const cut = await lastText(desk, tid('pg-answer'));
  await desk.waitForTimeout(300);
  assert.equal(await lastText(desk, tid('pg-answer')), cut, 'nothing more arrives after Stop');
  assert.equal(await textOf(desk, tid('pg-error')), '', 'Stop shows no error');
  assert.match(await lastText(desk, tid('pg-turn-meta')), /stopped/, 'the stopped turn says so');
  assert.equal(await desk.locator(answers).count(), 2, 'two assistant turns');
  assert.equal(await lastText(desk, tid('pg-user-text')), 'And another\none.', 'the second user turn');

  await desk.locator(tid('pg-render')).click();
  const rendered = desk.locator(tid('pg-rendered'));
  await rendered.waitFor({ timeout: 10000 });
  const prompt = (await rendered.textContent()) || '';
  assert.ok(prompt.length > 0, 'the rendered prompt is not empty');
  assert.ok(prompt.includes('Tell me a long story about routers.'), 'the rendered prompt holds the message');
  await shot(desk, 'desktop-playground');
  dw.check('on the playground');
});

test('desktop: a new key shows its secret once, then is revoked', async (t) => {
  if (!needSignIn(t)) return;
  await go(desk, 'keys');
  await desk.locator(tid('key-row')).first().waitFor({ timeout: 10000 });
  const name = `dash-test-${Date.now()}`;
  await desk.locator(tid('key-create-name')).fill(name);
  await desk.locator(tid('key-create-scope-inference')).check();
  await desk.locator(tid('key-create-scope-node')).uncheck();
  await desk.locator(tid('key-create-scope-admin')).uncheck();
  await desk.locator(tid('key-create-submit')).click();
  const secretEl = desk.locator(tid('key-secret'));
  await secretEl.waitFor({ timeout: 10000 });
  const secret = ((await secretEl.textContent()) || '').trim();
  assert.ok(secret.length >= 16, `the secret is shown (${secret.length} characters)`);
  assert.notEqual(secret, ADMIN);
  await desk.locator(tid('key-secret-copy')).click();
  await desk.waitForFunction((s) => navigator.clipboard.readText().then((c) => c === s), secret, { timeout: 5000 });
  await shot(desk, 'desktop-keys-secret');
  await desk.locator(tid('key-secret-close')).click();
  await secretEl.waitFor({ state: 'detached', timeout: 5000 });
  const leftover = await desk.evaluate((s) => {
    const values = [...document.querySelectorAll('input, textarea')].map((e) => e.value).join('\n');
    return document.documentElement.outerHTML.includes(s) || values.includes(s);
  }, secret);
  assert.equal(leftover, false, 'the secret appears nowhere in the page once closed');

  const row = desk.locator(tid('key-row')).filter({ hasText: name });
  await row.waitFor({ timeout: 10000 });
  const id = await row.getAttribute('data-key-id');
  assert.ok(id, 'the row names the key id');
  assert.equal(await textOf(row, tid('key-state')), 'active');
  assert.match(await row.textContent(), /inference/);
  await row.locator(tid('key-revoke')).click();
  await desk
    .locator(`${tid('key-row')}[data-key-id="${id}"] ${tid('key-state')}`)
    .filter({ hasText: /^revoked$/ })
    .waitFor({ timeout: 10000 });
  await shot(desk, 'desktop-keys');
  dw.check('on the keys page');
});

test('desktop: the requests page lists the chat', async (t) => {
  if (!needSignIn(t)) return;
  await go(desk, 'requests');
  await desk.locator(tid('request-row')).first().waitFor({ timeout: 15000 });
  const row = await desk.locator(tid('request-row')).first().textContent();
  assert.match(row, new RegExp(LOOP), 'the newest request names the model');
  await shot(desk, 'desktop-requests');
  dw.check('on the requests page');
});

// ---- the playground with gpt-oss-echo ------------------------------------------------
// The echo model answers a chat with the last user message, special tokens recognised,
// so each message below is the harmony the model "writes".
const REASONED = '<|channel|>analysis<|message|>Think.<|end|><|start|>assistant<|channel|>final<|message|>**Hi** there';
const CALL = '<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{"city":"Paris"}<|call|>';
const MARKDOWN =
  '<|channel|>final<|message|>Sunny in *Paris*:\n\n- `20 °C`\n- [forecast](https://example.com/w) and [bad](javascript:alert)\n\n```\nlet x = "<b>no</b>";\n```';
const TOOLS = JSON.stringify([
  {
    type: 'function',
    function: { name: 'get_weather', description: 'The weather in a city', parameters: { type: 'object', properties: { city: { type: 'string' } } } },
  },
]);

test('desktop: the playground chats with gpt-oss-echo: reasoning folded, a tool call, markdown', async (t) => {
  if (!needSignIn(t)) return;
  if (!ECHO_DIR) return t.skip("no gpt-oss-echo model here (it needs gpt-oss's tokenizer and chat template)");
  const echo = path.basename(ECHO_DIR);
  const reg = await fetch(`${BASE}/v0/models`, {
    method: 'POST',
    headers: { Authorization: `Bearer ${ADMIN}`, 'Content-Type': 'application/json' },
    body: JSON.stringify({ path: ECHO_DIR, format: 'safetensors' }),
  });
  assert.equal(reg.status, 201, `registering the echo model: ${reg.status} ${await reg.text()}`);
  await go(desk, 'playground');
  await waitForOption(desk, tid('pg-model'), echo, 60000);
  await desk.locator(tid('pg-model')).selectOption(echo);
  assert.equal(await desk.locator(tid('pg-turn')).count(), 0, 'the chat starts empty');
  await desk.locator(tid('pg-max-tokens')).fill('200');
  await desk.locator(tid('pg-tools')).fill(TOOLS);
  const bodies = [];
  const onRequest = (req) => {
    if (req.url().endsWith('/v1/chat/completions')) bodies.push(JSON.parse(req.postData() || '{}'));
  };
  desk.on('request', onRequest);
  const turns = (role) => desk.locator(`${tid('pg-turn')}[data-role="${role}"]`);
  const say = async (text) => {
    await desk.locator(tid('pg-message')).fill(text);
    await desk.locator(tid('pg-message')).press('Enter');
    await desk.waitForFunction((sel) => !document.querySelector(sel).disabled, tid('pg-send'), { timeout: 30000 });
    assert.equal(await textOf(desk, tid('pg-error')), '', `no error after ${JSON.stringify(text)}`);
  };

  // Turn 1: reasoning, then the answer, each filling in as it streams; every state
  // of the two is recorded.
  await desk.evaluate((sel) => {
    const el = document.querySelector(sel);
    window.__states = [];
    if (window.__observer) window.__observer.disconnect();
    window.__observer = new MutationObserver(() => {
      const turns = el.querySelectorAll('[data-role="assistant"]');
      const last = turns[turns.length - 1];
      if (!last) return;
      const r = last.querySelector('[data-testid="pg-reasoning-text"]');
      const a = last.querySelector('[data-testid="pg-answer"]');
      window.__states.push([r ? r.textContent : '', a ? a.textContent : '']);
    });
    window.__observer.observe(el, { subtree: true, childList: true, characterData: true });
  }, tid('pg-output'));
  await say(REASONED);
  const states = await desk.evaluate(() => window.__states);
  const first = turns('assistant').nth(0);
  const reasoning = first.locator(tid('pg-reasoning'));
  assert.equal(await reasoning.count(), 1, 'the turn has a reasoning block');
  assert.equal(await reasoning.evaluate((d) => d.tagName), 'DETAILS');
  assert.equal(await reasoning.evaluate((d) => d.open), false, 'the reasoning is folded');
  assert.equal(await textOf(reasoning, 'summary'), 'Reasoning');
  assert.equal(await textOf(first, tid('pg-reasoning-text')), 'Think.');
  assert.equal(await textOf(first, tid('pg-answer')), 'Hi there', 'the answer, apart from the reasoning');
  assert.equal(await textOf(first, `${tid('pg-answer')} strong`), 'Hi', '**Hi** is bold');
  assert.ok(
    states.some(([r, a]) => r.length > 0 && a === ''),
    `the reasoning arrived before the answer (states: ${JSON.stringify(states)})`
  );
  assert.ok(new Set(states.map((s) => s.join('|'))).size >= 3, `the turn filled in over several steps: ${JSON.stringify(states)}`);
  await reasoning.locator('summary').click();
  assert.equal(await reasoning.evaluate((d) => d.open), true, 'the reasoning unfolds');

  // Turn 2: a call, shown as one.
  await say(CALL);
  const second = turns('assistant').nth(1);
  assert.equal(await second.locator(tid('pg-tool-call')).count(), 1, 'one tool call');
  assert.equal(await textOf(second, tid('pg-tool-name')), 'get_weather');
  assert.equal(await textOf(second, tid('pg-tool-args')), JSON.stringify({ city: 'Paris' }, null, 2), 'the arguments pretty-printed');
  assert.equal(await second.locator(tid('pg-answer')).count(), 0, 'a call turn has no answer');
  assert.match(await textOf(second, tid('pg-turn-meta')), /finish: tool_calls/);

  // Turn 3: markdown, after the call; the request carried the whole conversation.
  await say(MARKDOWN);
  const third = turns('assistant').nth(2);
  const answer = third.locator(tid('pg-answer'));
  assert.equal(await textOf(answer, 'em'), 'Paris');
  assert.deepEqual(await answer.locator('li').allTextContents(), ['20 °C', 'forecast and [bad](javascript:alert)']);
  assert.equal(await textOf(answer, 'li code'), '20 °C');
  assert.equal(await answer.locator('a').count(), 1, 'only the https link is a link');
  assert.equal(await answer.locator('a').getAttribute('href'), 'https://example.com/w');
  assert.equal(await textOf(answer, 'pre code'), 'let x = "<b>no</b>";', 'the code block shows its text');
  assert.equal(await answer.locator('b').count(), 0, 'no markup made from the model’s text');
  assert.equal(await turns('user').count(), 3);
  assert.equal(await turns('assistant').count(), 3);

  desk.off('request', onRequest);
  assert.equal(bodies.length, 3, 'three chat requests');
  const last = bodies[2];
  assert.deepEqual(last.tools, JSON.parse(TOOLS), 'the tools are sent');
  const msgs = last.messages.filter((m) => m.role !== 'system');
  assert.deepEqual(
    msgs.map((m) => m.role),
    ['user', 'assistant', 'user', 'assistant', 'user'],
    'the whole conversation is sent'
  );
  assert.equal(msgs[1].content, '**Hi** there', 'an assistant turn is sent with its answer');
  assert.equal(msgs[3].content, null);
  assert.equal(msgs[3].tool_calls.length, 1);
  assert.equal(msgs[3].tool_calls[0].type, 'function');
  assert.equal(msgs[3].tool_calls[0].function.name, 'get_weather');
  assert.deepEqual(JSON.parse(msgs[3].tool_calls[0].function.arguments), { city: 'Paris' });
  assert.ok(msgs[3].tool_calls[0].id, 'the call keeps its id');

  // No special token's text anywhere on the page but in what the user wrote.
  const leaked = await desk.evaluate(() => {
    const body = document.body.cloneNode(true);
    for (const el of body.querySelectorAll('[data-testid="pg-user-text"], textarea')) el.remove();
    return body.textContent;
  });
  for (const token of ['<|', '|>', 'assistantfinal', 'to=functions'])
    assert.ok(!leaked.includes(token), `the page shows no ${JSON.stringify(token)}`);
  await shot(desk, 'desktop-playground-chat');

  await desk.locator(tid('pg-clear')).click();
  assert.equal(await desk.locator(tid('pg-turn')).count(), 0, 'Clear empties the chat');
  dw.check('on the playground with the echo model');
});

test('desktop: both charts are drawn', async (t) => {
  if (!needSignIn(t)) return;
  await go(desk, 'charts');
  for (const id of ['chart-tokens', 'chart-latency']) {
    const chart = desk.locator(tid(id));
    await chart.waitFor({ timeout: 10000 });
    await chart.locator('canvas').first().waitFor({ timeout: 10000 });
    const box = await chart.boundingBox();
    assert.ok(box && box.width > 200 && box.height > 100, `${id} has a size (${JSON.stringify(box)})`);
  }
  await desk.waitForTimeout(1200); // one more snapshot on the charts
  await shot(desk, 'desktop-charts');
  dw.check('on the charts page');
});

test('desktop: the nodes page after traffic shows the model loaded, Unload unloads it, then sign out', async (t) => {
  if (!needSignIn(t)) return;
  await go(desk, 'nodes');
  await desk.locator(tid('node-card')).first().waitFor();
  await shot(desk, 'desktop-nodes-after');
  if (loopReady) {
    // the playground's chats loaded the loopback model: the node card says so (llmr ps);
    // Unload on the models page unloads it (llmr stop) and the card stops saying it
    const loaded = desk.locator(tid('node-models')).locator('li', { hasText: LOOP }).locator(tid('node-model-loaded'));
    await loaded.waitFor({ timeout: 10000 });
    assert.match(await loaded.textContent(), /loaded · .*B · \d+ running/);
    await go(desk, 'models');
    const row = desk.locator(`${tid('model-row')}[data-model="${LOOP}"]`);
    await row.locator(tid('model-unload')).click();
    await row.locator(tid('model-unload-note')).waitFor({ timeout: 5000 });
    await go(desk, 'nodes');
    await loaded.waitFor({ state: 'detached', timeout: 10000 });
  }
  await desk.locator(tid('signout')).click();
  await desk.locator(tid('signin-key')).waitFor({ timeout: 5000 });
  const stored = await desk.evaluate(() => JSON.stringify(sessionStorage));
  assert.ok(!stored.includes(ADMIN), 'signing out forgets the key');
  dw.check('after sign-out');
  await desk.context().close();
});

// ---- states a CPU-only serve never shows -------------------------------------------------
// GPU nodes, a drained and an offline node, a model syncing and one failed: a made-up
// snapshot answers /v0/events (the rest of the API is the real router's).
function syntheticSnapshot() {
  const now = Date.now();
  const gpu = { name: 'NVIDIA H100 80GB HBM3', vram_total: 85899345920 };
  const node = (id, name, extra) => ({
    id,
    name,
    url: `http://10.0.0.${id.slice(2)}:8081`,
    online: true,
    drained: false,
    last_seen_ms_ago: 420,
    outstanding: 3,
    models: [{ name: 'gpt-oss-20b', state: 'ready' }],
    metrics: { in_flight: 3, ram_used: 64e9, ram_total: 137e9, vram_used: 150e9, vram_total: 171.8e9 },
    info: { name, url: '', version: '0.1.0', has_gpu: true, allow_cpu: false, gpus: [gpu, gpu], ram_total: 137e9 },
    ttft_ms: 14.3,
    ...extra,
  });
  return {
    time_ms: now,
    nodes: [
      node('n-1', 'gpu-a'),
      node('n-2', 'gpu-b', { drained: true }),
      node('n-3', 'gpu-c', { online: false, last_seen_ms_ago: 60000 }),
    ],
    models: [
      {
        name: 'gpt-oss-120b',
        format: 'safetensors',
        source: 'openai/gpt-oss-120b',
        source_kind: 'hub',
        ready: false,
        chat_template_origin: 'chat_template.jinja',
        nodes: [
          {
            node: 'n-1',
            node_name: 'gpu-a',
            online: true,
            state: 'syncing',
            sync: {
              state: 'fetching',
              file: 'model-00004-of-00007.safetensors',
              bytes_done: 31e9,
              bytes_total: 65e9,
              files_done: 3,
              files_total: 7,
            },
          },
          { node: 'n-2', node_name: 'gpu-b', online: true, state: 'failed', reason: 'model-00002-of-00007.safetensors: sha256 differs' },
        ],
      },
    ],
    requests: [
      {
        id: 1,
        time_ms: now - 2000,
        model: 'gpt-oss-20b',
        node: 'n-1',
        key_id: 'key_x',
        endpoint: '/v1/chat/completions',
        status: 200,
        prompt_tokens: 120,
        completion_tokens: 800,
        ttft_ms: 15,
        duration_ms: 1600,
        error: null,
      },
      {
        id: 2,
        time_ms: now - 1000,
        model: 'gpt-oss-20b',
        node: 'n-1',
        key_id: 'key_x',
        endpoint: '/v1/chat/completions',
        status: 502,
        prompt_tokens: 0,
        completion_tokens: 0,
        ttft_ms: null,
        duration_ms: 3,
        error: 'the node failed before its first byte',
      },
    ],
    stats: { window_s: 10, requests: 2, completion_tokens: 800, tokens_per_s: 80, ttft_ms_p50: 15, ttft_ms_p90: 15, duration_ms_p50: 800, errors: 1, in_flight: 3 },
  };
}

test('desktop: GPU nodes, drained and offline nodes, a syncing and a failed model', async (t) => {
  if (!needSignIn(t)) return;
  const ctx = await browser.newContext({ viewport: { width: 1280, height: 800 } });
  const page = await ctx.newPage();
  const w = watch(page, '1280×800, made-up snapshot');
  await page.route('**/v0/events', (route) =>
    route.fulfill({
      status: 200,
      contentType: 'text/event-stream',
      body: `: a made-up snapshot\nevent: snapshot\ndata: ${JSON.stringify(syntheticSnapshot())}\n\n`,
    })
  );
  await page.goto(`${BASE}/dashboard`);
  await page.locator(tid('signin-key')).fill(ADMIN);
  await page.locator(tid('signin-submit')).click();
  const cards = page.locator(tid('node-card'));
  await cards.nth(2).waitFor({ timeout: 10000 });
  const card = (id) => page.locator(`${tid('node-card')}[data-node-id="${id}"]`);
  assert.equal(await textOf(card('n-1'), tid('node-status')), 'online');
  assert.equal(await textOf(card('n-2'), tid('node-status')), 'drained');
  assert.equal(await textOf(card('n-3'), tid('node-status')), 'offline');
  assert.equal(await textOf(card('n-1'), tid('node-gpu')), '2 × NVIDIA H100 80GB HBM3');
  const vram = Number(await card('n-1').locator(tid('node-vram-bar')).getAttribute('aria-valuenow'));
  assert.equal(vram, 87, 'the VRAM bar shows 150 of 171.8 GB');
  assert.equal(await textOf(card('n-1'), tid('node-inflight')), '3');
  assert.equal(await textOf(card('n-1'), tid('node-tps')), '80.0', 'tokens/s: 800 tokens in the last 10 s');
  await shot(page, 'desktop-synthetic-nodes');

  await go(page, 'models');
  const row = page.locator(`${tid('model-row')}[data-model="gpt-oss-120b"]`);
  await row.waitFor({ timeout: 10000 });
  assert.equal(await textOf(row, tid('model-ready')), 'not ready');
  assert.match(await textOf(row, tid('model-reason')), /gpu-b: failed \(model-00002-of-00007\.safetensors: sha256 differs\)/);
  const sync = await textOf(row, tid('model-sync'));
  for (const part of ['3/7 files', '31.0 GB / 65.0 GB', 'model-00004-of-00007.safetensors'])
    assert.ok(sync.includes(part), `the sync progress shows ${part}: ${sync}`);
  await row.locator(tid('model-delete')).click();
  await row.locator(tid('model-delete-confirm')).waitFor();
  await shot(page, 'desktop-synthetic-models');

  await go(page, 'requests');
  await page.locator(tid('request-row')).nth(1).waitFor({ timeout: 10000 });
  assert.match(await page.locator(tid('request-row')).nth(1).textContent(), /the node failed before its first byte/);
  await shot(page, 'desktop-synthetic-requests');
  w.check('with the made-up snapshot');
  await ctx.close();
});

// ---- 390×844 ----------------------------------------------------------------------------
test('phone: every page fits 390 px', async (t) => {
  if (!needSignIn(t)) return;
  const ctx = await browser.newContext({
    viewport: { width: 390, height: 844 },
    deviceScaleFactor: 2,
    isMobile: true,
    hasTouch: true,
  });
  const page = await ctx.newPage();
  const w = watch(page, '390×844');
  const fits = async (where) => {
    const width = await page.evaluate(() => document.documentElement.scrollWidth);
    assert.ok(width <= 391, `${where}: the page is ${width} px wide at 390`);
  };
  await page.goto(`${BASE}/dashboard`);
  await page.locator(tid('signin-key')).waitFor();
  await fits('sign-in');
  await shot(page, 'phone-signin');
  await page.locator(tid('signin-key')).fill(ADMIN);
  await page.locator(tid('signin-submit')).click();
  await page.locator(tid('live-status')).filter({ hasText: /^live$/ }).waitFor({ timeout: 15000 });
  for (const id of PAGES) {
    const link = page.locator(tid(`nav-${id}`));
    assert.equal(await link.isVisible(), false, `the navigation is folded (nav-${id} hidden)`);
    await page.locator('button[aria-controls="nav"]').click();
    await link.waitFor({ state: 'visible' });
    if (id === PAGES[0]) await shot(page, 'phone-menu');
    await link.click();
    await page.waitForFunction((h) => location.hash === h, `#/${id}`);
    await link.waitFor({ state: 'hidden' });
    if (id === 'nodes') await page.locator(tid('node-card')).first().waitFor({ timeout: 10000 });
    if (id === 'models') await page.locator(tid('model-row')).first().waitFor({ timeout: 10000 });
    if (id === 'keys') await page.locator(tid('key-row')).first().waitFor({ timeout: 10000 });
    if (id === 'requests') await page.locator(tid('request-row')).first().waitFor({ timeout: 10000 });
    if (id === 'charts') await page.locator(`${tid('chart-latency')} canvas`).first().waitFor({ timeout: 10000 });
    if (id === 'playground') await page.locator(tid('pg-message')).waitFor({ timeout: 10000 });
    await page.waitForTimeout(150);
    await fits(id);
    await shot(page, `phone-${id}`);
    w.check(`on ${id}`);
  }
  await ctx.close();
});
