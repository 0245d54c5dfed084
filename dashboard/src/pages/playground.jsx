// Playground: a multi-turn chat with a ready model through /v1/chat/completions,
// streamed.  Each assistant turn shows its reasoning (delta.reasoning_content) folded
// apart from its answer, its tool calls as calls (name and arguments), and its answer
// as markdown, each filling in as the tokens arrive; Stop aborts the stream, Clear
// starts over.  Every send carries the whole conversation.  "Show rendered prompt" asks
// the router for the prompt its chat template makes of the same messages.
import { useEffect, useRef, useState } from 'preact/hooks';
import { api } from '../api.js';
import { SseParser } from '../sse.js';
import { Markdown } from '../markdown.jsx';

// The tools field: empty, or a JSON array of OpenAI function tools; an entry that is
// only a function ({name, parameters}) is wrapped as {type: "function", function}.
function parseTools(text) {
  if (!text.trim()) return { tools: null };
  let v;
  try {
    v = JSON.parse(text);
  } catch (e) {
    return { problem: `Tools: not JSON (${e.message}).` };
  }
  if (!Array.isArray(v)) v = [v];
  const tools = [];
  for (const t of v) {
    if (t && typeof t === 'object' && t.type === 'function' && t.function && typeof t.function.name === 'string') tools.push(t);
    else if (t && typeof t === 'object' && typeof t.name === 'string') tools.push({ type: 'function', function: t });
    else return { problem: 'Tools: each one needs a function name ({"type": "function", "function": {"name": ...}}).' };
  }
  return { tools };
}

// The conversation as chat messages: assistant turns with their answer and their calls
// (a turn that brought neither is left out).
function historyMessages(turns) {
  const out = [];
  for (const t of turns) {
    if (t.role === 'user') {
      out.push({ role: 'user', content: t.content });
      continue;
    }
    const calls = t.calls.filter((c) => c.name);
    if (!t.content && calls.length === 0) continue;
    const m = { role: 'assistant', content: t.content || (calls.length ? null : '') };
    if (calls.length)
      m.tool_calls = calls.map((c, i) => ({
        id: c.id || `call_${i}`,
        type: 'function',
        function: { name: c.name, arguments: c.arguments || '{}' },
      }));
    out.push(m);
  }
  return out;
}

function chatBody(model, system, turns, temperature, maxTokens, tools) {
  const messages = [];
  if (system.trim()) messages.push({ role: 'system', content: system });
  messages.push(...historyMessages(turns));
  const body = { model, messages };
  const t = parseFloat(temperature);
  if (isFinite(t)) body.temperature = t;
  const n = parseInt(maxTokens, 10);
  if (isFinite(n) && n > 0) body.max_tokens = n;
  if (tools) body.tools = tools;
  return body;
}

// A call's arguments, pretty-printed when they are (already) whole JSON.
function prettyArgs(text) {
  try {
    return JSON.stringify(JSON.parse(text), null, 2);
  } catch {
    return text;
  }
}

// Folds one streamed chunk's delta into the assistant turn t (a copy is returned).
function applyDelta(t, delta) {
  const next = { ...t };
  const reasoning = delta.reasoning_content ?? delta.reasoning;
  if (typeof reasoning === 'string') next.reasoning += reasoning;
  if (typeof delta.content === 'string') next.content += delta.content;
  if (Array.isArray(delta.tool_calls)) {
    next.calls = t.calls.map((c) => ({ ...c }));
    for (const tc of delta.tool_calls) {
      const i = Number.isInteger(tc.index) ? tc.index : next.calls.length;
      while (next.calls.length <= i) next.calls.push({ id: '', name: '', arguments: '' });
      const c = next.calls[i];
      if (tc.id) c.id = tc.id;
      if (tc.function && typeof tc.function.name === 'string' && tc.function.name) c.name = tc.function.name;
      if (tc.function && typeof tc.function.arguments === 'string') c.arguments += tc.function.arguments;
    }
  }
  return next;
}

function UserTurn({ turn }) {
  return (
    <div class="turn turn-user" data-testid="pg-turn" data-role="user">
      <div class="turn-role">You</div>
      <div class="turn-text" data-testid="pg-user-text">
        {turn.content}
      </div>
    </div>
  );
}

function AssistantTurn({ turn }) {
  const empty = !turn.reasoning && !turn.content && turn.calls.length === 0;
  return (
    <div class="turn turn-assistant" data-testid="pg-turn" data-role="assistant" data-streaming={turn.streaming ? 'true' : 'false'}>
      <div class="turn-role">{turn.model || 'Model'}</div>
      {turn.reasoning && (
        <details class="reasoning" data-testid="pg-reasoning">
          <summary>Reasoning</summary>
          <div class="reasoning-text" data-testid="pg-reasoning-text">
            {turn.reasoning}
          </div>
        </details>
      )}
      {turn.content && (
        <div class="answer markdown" data-testid="pg-answer">
          <Markdown text={turn.content} />
        </div>
      )}
      {turn.calls.map((c) => (
        <div class="tool-call" data-testid="pg-tool-call" data-name={c.name}>
          <div class="tool-call-head">
            <span class="muted small">calls</span> <code data-testid="pg-tool-name">{c.name || '…'}</code>
          </div>
          <pre class="tool-args" data-testid="pg-tool-args">
            {prettyArgs(c.arguments)}
          </pre>
        </div>
      ))}
      {empty && <p class="muted small">{turn.streaming ? 'waiting for the first token…' : 'no answer'}</p>}
      {turn.meta && (
        <p class="muted small turn-meta" data-testid="pg-turn-meta">
          {turn.meta}
        </p>
      )}
    </div>
  );
}

export function Playground({ apiKey, snapshot }) {
  const ready = ((snapshot && snapshot.models) || []).filter((m) => m.ready).map((m) => m.name);
  const [model, setModel] = useState('');
  const [temperature, setTemperature] = useState('0.7');
  const [maxTokens, setMaxTokens] = useState('256');
  const [system, setSystem] = useState('');
  const [toolsText, setToolsText] = useState('');
  const [message, setMessage] = useState('');
  const [turns, setTurns] = useState([]);
  const [error, setError] = useState('');
  const [rendered, setRendered] = useState('');
  const [streaming, setStreaming] = useState(false);
  const ctrl = useRef(null);
  const list = useRef(null);

  // The model: the one chosen while it is ready, else the first ready one.
  const chosen = ready.includes(model) ? model : ready[0] || '';
  useEffect(() => () => ctrl.current && ctrl.current.abort(), []);
  // The newest turn stays in view while it streams.
  useEffect(() => {
    const el = list.current;
    if (el) el.scrollTop = el.scrollHeight;
  }, [turns]);

  const send = async (e) => {
    if (e) e.preventDefault();
    if (streaming) return;
    let problem = '';
    const { tools, problem: toolsProblem } = parseTools(toolsText);
    if (!chosen) problem = 'No model is ready yet.';
    else if (!message.trim()) problem = 'Write a message first.';
    else if (toolsProblem) problem = toolsProblem;
    setError(problem);
    if (problem) return;

    const history = [...turns, { role: 'user', content: message }];
    let turn = { role: 'assistant', model: chosen, reasoning: '', content: '', calls: [], meta: '', streaming: true };
    const show = () => setTurns([...history, turn]);
    show();
    setMessage('');
    const c = new AbortController();
    ctrl.current = c;
    setStreaming(true);
    const started = performance.now();
    let first = 0;
    let chunks = 0;
    let finish = '';
    let usage = null;
    try {
      const res = await fetch('/v1/chat/completions', {
        method: 'POST',
        headers: { Authorization: `Bearer ${apiKey}`, 'Content-Type': 'application/json', Accept: 'text/event-stream' },
        // include_usage: the last chunk carries the token counts (shown here, and logged by
        // the router for the requests page and the tokens/s figures).
        body: JSON.stringify({
          ...chatBody(chosen, system, history, temperature, maxTokens, tools),
          stream: true,
          stream_options: { include_usage: true },
        }),
        signal: c.signal,
        cache: 'no-store',
      });
      if (!res.ok || !res.body) {
        let msg = `${res.status}`;
        try {
          const j = await res.json();
          if (j && j.error && j.error.message) msg += `: ${j.error.message}`;
        } catch {
          /* not JSON */
        }
        throw new Error(msg);
      }
      const reader = res.body.getReader();
      const decoder = new TextDecoder();
      const parser = new SseParser();
      let done = false;
      while (!done) {
        const r = await reader.read();
        if (r.done) break;
        const before = turn;
        for (const ev of parser.push(decoder.decode(r.value, { stream: true }))) {
          if (ev.data === '[DONE]') {
            done = true;
            break;
          }
          let chunk;
          try {
            chunk = JSON.parse(ev.data);
          } catch {
            continue;
          }
          if (chunk.error) throw new Error(chunk.error.message || JSON.stringify(chunk.error));
          const choice = chunk.choices && chunk.choices[0];
          if (choice && choice.delta) {
            const d = choice.delta;
            if (d.content || d.reasoning_content || d.reasoning || (d.tool_calls && d.tool_calls.length)) {
              if (!first) first = performance.now();
              chunks++;
            }
            turn = applyDelta(turn, d);
          }
          if (choice && choice.finish_reason) finish = choice.finish_reason;
          if (chunk.usage) usage = chunk.usage;
        }
        if (turn !== before) show();
      }
      const total = performance.now() - started;
      turn = {
        ...turn,
        meta: [
          usage ? `${usage.prompt_tokens} prompt + ${usage.completion_tokens} completion tokens` : `${chunks} chunks`,
          `first token after ${first ? Math.round(first - started) : '–'} ms`,
          `${Math.round(total)} ms in all`,
          finish && `finish: ${finish}`,
        ]
          .filter(Boolean)
          .join(' · '),
      };
    } catch (err) {
      if (err && err.name === 'AbortError') turn = { ...turn, meta: `stopped after ${chunks} chunks` };
      else setError(err.message || String(err));
    } finally {
      turn = { ...turn, streaming: false };
      show();
      if (ctrl.current === c) ctrl.current = null;
      setStreaming(false);
    }
  };

  const stop = () => {
    if (ctrl.current) ctrl.current.abort();
  };

  const clear = () => {
    setTurns([]);
    setRendered('');
    setError('');
  };

  // The conversation so far, plus the message being written when there is one.
  const pending = () => (message.trim() ? [...turns, { role: 'user', content: message }] : turns);

  const showRendered = async () => {
    const { tools, problem: toolsProblem } = parseTools(toolsText);
    let problem = '';
    if (!chosen) problem = 'No model is ready yet.';
    else if (pending().length === 0) problem = 'Write a message first.';
    else if (toolsProblem) problem = toolsProblem;
    setError(problem);
    if (problem) return;
    try {
      const r = await api.render(apiKey, chosen, chatBody(chosen, system, pending(), temperature, maxTokens, tools));
      setRendered(r.prompt || '');
      if (!r.prompt) setError('The template rendered an empty prompt.');
    } catch (err) {
      setRendered('');
      setError(
        err.status === 409 ? `${err.message} (this model’s node renders its own template)` : err.message || String(err)
      );
    }
  };

  return (
    <div class="playground">
      <section class="card form">
        <div class="grid-form">
          <label class="wide">
            Model
            <select data-testid="pg-model" value={chosen} onChange={(e) => setModel(e.currentTarget.value)}>
              {ready.length === 0 && <option value="">no model ready</option>}
              {ready.map((n) => (
                <option value={n}>{n}</option>
              ))}
            </select>
          </label>
          <label>
            Temperature
            <input
              data-testid="pg-temperature"
              type="number"
              min="0"
              max="2"
              step="0.1"
              value={temperature}
              onInput={(e) => setTemperature(e.currentTarget.value)}
            />
          </label>
          <label>
            Max tokens
            <input
              data-testid="pg-max-tokens"
              type="number"
              min="1"
              step="1"
              value={maxTokens}
              onInput={(e) => setMaxTokens(e.currentTarget.value)}
            />
          </label>
          <label class="full">
            <span>System message <span class="muted small">(optional)</span></span>
            <textarea data-testid="pg-system" rows="2" value={system} onInput={(e) => setSystem(e.currentTarget.value)} />
          </label>
          <label class="full">
            <span>
              Tools <span class="muted small">(optional: a JSON array of function tools, sent as <code>tools</code>)</span>
            </span>
            <textarea
              data-testid="pg-tools"
              class="mono"
              rows="2"
              spellcheck={false}
              value={toolsText}
              onInput={(e) => setToolsText(e.currentTarget.value)}
            />
          </label>
        </div>
      </section>
      <form class="card chat" onSubmit={send}>
        <div class="chat-head">
          <h2>Chat</h2>
          <button type="button" class="ghost" data-testid="pg-clear" disabled={streaming || turns.length === 0} onClick={clear}>
            Clear
          </button>
        </div>
        <div class="messages" data-testid="pg-output" ref={list} aria-live="polite">
          {turns.length === 0 && <p class="muted small">No messages yet.</p>}
          {turns.map((t) => (t.role === 'user' ? <UserTurn turn={t} /> : <AssistantTurn turn={t} />))}
        </div>
        <label class="chat-input">
          <span>
            Message <span class="muted small">(Enter sends, Shift+Enter starts a new line)</span>
          </span>
          <textarea
            data-testid="pg-message"
            rows="3"
            value={message}
            onInput={(e) => setMessage(e.currentTarget.value)}
            onKeyDown={(e) => {
              if (e.key === 'Enter' && !e.shiftKey && !e.isComposing) send(e);
            }}
          />
        </label>
        <div class="actions">
          <button type="submit" class="primary" data-testid="pg-send" disabled={streaming}>
            {streaming ? 'Streaming…' : 'Send'}
          </button>
          <button type="button" data-testid="pg-stop" disabled={!streaming} onClick={stop}>
            Stop
          </button>
          <button type="button" class="ghost" data-testid="pg-render" onClick={showRendered}>
            Show rendered prompt
          </button>
        </div>
        <p class="error" data-testid="pg-error" role="alert" hidden={!error}>
          {error}
        </p>
      </form>
      {rendered && (
        <section class="card">
          <h2>Rendered prompt</h2>
          <pre class="output" data-testid="pg-rendered">
            {rendered}
          </pre>
        </section>
      )}
    </div>
  );
}
