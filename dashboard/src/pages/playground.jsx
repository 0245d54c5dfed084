// Playground: a chat with a ready model through /v1/chat/completions, streamed into
// the output as the tokens arrive; Stop aborts it.  "Show rendered prompt" asks the
// router for the prompt its chat template makes of the same messages.
import { useEffect, useRef, useState } from 'preact/hooks';
import { api } from '../api.js';
import { SseParser } from '../sse.js';

function chatBody(model, system, message, temperature, maxTokens) {
  const messages = [];
  if (system.trim()) messages.push({ role: 'system', content: system });
  messages.push({ role: 'user', content: message });
  const body = { model, messages };
  const t = parseFloat(temperature);
  if (isFinite(t)) body.temperature = t;
  const n = parseInt(maxTokens, 10);
  if (isFinite(n) && n > 0) body.max_tokens = n;
  return body;
}

export function Playground({ apiKey, snapshot }) {
  const ready = ((snapshot && snapshot.models) || []).filter((m) => m.ready).map((m) => m.name);
  const [model, setModel] = useState('');
  const [temperature, setTemperature] = useState('0.7');
  const [maxTokens, setMaxTokens] = useState('256');
  const [system, setSystem] = useState('');
  const [message, setMessage] = useState('');
  const [output, setOutput] = useState('');
  const [meta, setMeta] = useState('');
  const [error, setError] = useState('');
  const [rendered, setRendered] = useState('');
  const [streaming, setStreaming] = useState(false);
  const ctrl = useRef(null);

  // The model: the one chosen while it is ready, else the first ready one.
  const chosen = ready.includes(model) ? model : ready[0] || '';
  useEffect(() => () => ctrl.current && ctrl.current.abort(), []);

  const check = () => {
    if (!chosen) return 'No model is ready yet.';
    if (!message.trim()) return 'Write a message first.';
    return '';
  };

  const send = async (e) => {
    e.preventDefault();
    const problem = check();
    setError(problem);
    if (problem) return;
    const c = new AbortController();
    ctrl.current = c;
    setOutput('');
    setMeta('');
    setStreaming(true);
    const started = performance.now();
    let first = 0;
    let chunks = 0;
    let text = '';
    let finish = '';
    let usage = null;
    try {
      const res = await fetch('/v1/chat/completions', {
        method: 'POST',
        headers: { Authorization: `Bearer ${apiKey}`, 'Content-Type': 'application/json', Accept: 'text/event-stream' },
        // include_usage: the last chunk carries the token counts (shown here, and logged by
        // the router for the requests page and the tokens/s figures).
        body: JSON.stringify({
          ...chatBody(chosen, system, message, temperature, maxTokens),
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
        let added = '';
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
          const piece = choice && choice.delta && (choice.delta.content || choice.delta.reasoning_content || '');
          if (piece) {
            if (!first) first = performance.now();
            added += piece;
            chunks++;
          }
          if (choice && choice.finish_reason) finish = choice.finish_reason;
          if (chunk.usage) usage = chunk.usage;
        }
        if (added) {
          text += added;
          setOutput(text);
        }
      }
      const total = performance.now() - started;
      setMeta(
        [
          usage ? `${usage.prompt_tokens} prompt + ${usage.completion_tokens} completion tokens` : `${chunks} chunks`,
          `first token after ${first ? Math.round(first - started) : '–'} ms`,
          `${Math.round(total)} ms in all`,
          finish && `finish: ${finish}`,
        ]
          .filter(Boolean)
          .join(' · ')
      );
    } catch (err) {
      if (err && err.name === 'AbortError') setMeta(`stopped after ${chunks} chunks`);
      else setError(err.message || String(err));
    } finally {
      if (ctrl.current === c) ctrl.current = null;
      setStreaming(false);
    }
  };

  const stop = () => {
    if (ctrl.current) ctrl.current.abort();
  };

  const showRendered = async () => {
    const problem = check();
    setError(problem);
    if (problem) return;
    try {
      const r = await api.render(apiKey, chosen, chatBody(chosen, system, message, temperature, maxTokens));
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
      <form class="card form" onSubmit={send}>
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
            Message
            <textarea
              data-testid="pg-message"
              rows="4"
              value={message}
              onInput={(e) => setMessage(e.currentTarget.value)}
              onKeyDown={(e) => {
                if (e.key === 'Enter' && (e.ctrlKey || e.metaKey)) send(e);
              }}
            />
          </label>
        </div>
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
      <section class="card">
        <h2>Output</h2>
        <pre class="output" data-testid="pg-output" aria-live="polite">{output}</pre>
        {meta && <p class="muted small">{meta}</p>}
      </section>
      {rendered && (
        <section class="card">
          <h2>Rendered prompt</h2>
          <pre class="output" data-testid="pg-rendered">{rendered}</pre>
        </section>
      )}
    </div>
  );
}
