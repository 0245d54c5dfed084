// Models: the registration form (its refusals with the files they name) and the
// registered models with where they are ready, why not, each node's sync progress,
// and delete with a confirm step.
import { useEffect, useState } from 'preact/hooks';
import { api } from '../api.js';
import { bytes } from '../format.js';
import { Bar, StateBadge, Waiting } from './common.jsx';

function fileText(f) {
  if (typeof f === 'string') return f;
  if (f && typeof f === 'object') return f.path || f.file || f.name || JSON.stringify(f);
  return String(f);
}

function RegisterForm({ apiKey }) {
  const [kind, setKind] = useState('repo');
  const [source, setSource] = useState('');
  const [format, setFormat] = useState('safetensors');
  const [name, setName] = useState('');
  const [filename, setFilename] = useState('');
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState(null); // {message, files}
  const [done, setDone] = useState('');

  const submit = async (e) => {
    e.preventDefault();
    setError(null);
    setDone('');
    const src = source.trim();
    if (!src) {
      setError({ message: kind === 'repo' ? 'Give a Hugging Face repo, e.g. openai/gpt-oss-20b.' : 'Give an absolute directory on the router’s machine.', files: [] });
      return;
    }
    if (kind === 'path' && !src.startsWith('/')) {
      setError({ message: 'A directory must be an absolute path (it is read on the router’s machine).', files: [] });
      return;
    }
    const body = { [kind]: src, format };
    if (name.trim()) body.name = name.trim();
    if (filename.trim()) body.filename = filename.trim();
    setBusy(true);
    try {
      const m = await api.registerModel(apiKey, body);
      setDone(`Registered ${m.name || name || src}: the nodes now sync it.`);
      setSource('');
      setName('');
      setFilename('');
    } catch (err) {
      let message = err.message || String(err);
      if (err.status === 409) message += ' Choose another name, or delete the model first.';
      setError({ message, files: err.files || [] });
    } finally {
      setBusy(false);
    }
  };

  return (
    <form class="card form register" onSubmit={submit}>
      <h2>Register a model</h2>
      <div class="grid-form">
        <label>
          Source
          <select data-testid="register-kind" value={kind} onChange={(e) => setKind(e.currentTarget.value)}>
            <option value="repo">Hugging Face repo</option>
            <option value="path">Directory</option>
          </select>
        </label>
        <label class="wide">
          {kind === 'repo' ? 'Repo (org/name, org/name@rev or URL)' : 'Directory (absolute, on the router’s machine)'}
          <input
            data-testid="register-source"
            value={source}
            placeholder={kind === 'repo' ? 'openai/gpt-oss-20b' : '/srv/models/my-model'}
            onInput={(e) => setSource(e.currentTarget.value)}
            spellcheck={false}
            autocomplete="off"
          />
        </label>
        <label>
          Format
          <select data-testid="register-format" value={format} onChange={(e) => setFormat(e.currentTarget.value)}>
            <option value="safetensors">safetensors</option>
            <option value="gguf">gguf</option>
          </select>
        </label>
        <label>
          <span>Name <span class="muted small">(optional)</span></span>
          <input data-testid="register-name" value={name} onInput={(e) => setName(e.currentTarget.value)} spellcheck={false} autocomplete="off" />
        </label>
        <label>
          <span>Filename <span class="muted small">(optional, gguf)</span></span>
          <input
            data-testid="register-filename"
            value={filename}
            onInput={(e) => setFilename(e.currentTarget.value)}
            spellcheck={false}
            autocomplete="off"
          />
        </label>
      </div>
      <div class="actions">
        <button type="submit" class="primary" data-testid="register-submit" disabled={busy}>
          {busy ? 'Registering…' : 'Register'}
        </button>
        {done && <span class="ok-text">{done}</span>}
      </div>
      {error && (
        <div class="error-box" role="alert">
          <p class="error" data-testid="register-error">
            {error.message}
          </p>
          {error.files.length > 0 && (
            <ul class="files" data-testid="register-error-files">
              {error.files.map((f) => (
                <li>
                  <code>{fileText(f)}</code>
                </li>
              ))}
            </ul>
          )}
        </div>
      )}
    </form>
  );
}

// The numeric sync progress of a node's entry, whatever fields it has: nested under
// "sync" (the node's heartbeat) or flat.
export function syncProgress(entry) {
  const s = entry && typeof entry.sync === 'object' && entry.sync ? { ...entry, ...entry.sync } : entry || {};
  const num = (k) => (typeof s[k] === 'number' && isFinite(s[k]) ? s[k] : null);
  const filesDone = num('files_done');
  const filesTotal = num('files_total') ?? num('files');
  const bytesDone = num('bytes_done') ?? num('bytes');
  const bytesTotal = num('bytes_total');
  const parts = [];
  if (filesTotal != null) parts.push(filesDone != null ? `${filesDone}/${filesTotal} files` : `${filesTotal} files`);
  else if (filesDone != null) parts.push(`${filesDone} files`);
  if (bytesDone != null) parts.push(bytesTotal ? `${bytes(bytesDone)} / ${bytes(bytesTotal)}` : bytes(bytesDone));
  if (typeof s.file === 'string' && s.file) parts.push(s.file);
  if (s.state && s.state !== entry.state && typeof s.state === 'string') parts.unshift(s.state);
  return { text: parts.join(' · '), done: bytesDone, total: bytesTotal || null };
}

function readyText(model) {
  const nodes = Array.isArray(model.nodes) ? model.nodes : [];
  const ready = nodes.filter((n) => n.state === 'ready' && n.online !== false).length;
  if (model.ready) return `ready on ${ready || 1}/${nodes.length || 1} node${nodes.length === 1 ? '' : 's'}`;
  if (!nodes.length) return 'no node registered';
  return nodes
    .map((n) => {
      const who = n.node_name || n.node;
      if (n.online === false) return `${who}: offline`;
      const state = String(n.state || 'unknown').replace(/_/g, ' ');
      return `${who}: ${state}${n.reason ? ` (${n.reason})` : ''}`;
    })
    .join('; ');
}

function ModelRow({ model, apiKey, onDeleted }) {
  const [confirming, setConfirming] = useState(false);
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState('');
  const [unloaded, setUnloaded] = useState(false);
  const nodes = Array.isArray(model.nodes) ? model.nodes : [];

  // llmr stop: every node unloads the model and keeps its files
  const unload = async () => {
    setError('');
    try {
      await api.unloadModel(apiKey, model.name);
      setUnloaded(true);
    } catch (err) {
      setError(err.message || String(err));
    }
  };

  const remove = async () => {
    setBusy(true);
    setError('');
    try {
      await api.deleteModel(apiKey, model.name);
      onDeleted(model.name);
    } catch (err) {
      setError(err.message || String(err));
      setBusy(false);
      setConfirming(false);
    }
  };

  return (
    <tr data-testid="model-row" data-model={model.name}>
      <td>
        <strong>{model.name}</strong>
        <div class="muted small">{model.format}</div>
      </td>
      <td class="source">
        <span class="muted small">{model.source_kind}</span> <code>{model.source}</code>
        {model.chat_template_origin && <div class="muted small">template: {model.chat_template_origin}</div>}
      </td>
      <td>
        <span class={`badge ${model.ready ? 'badge-ok' : 'badge-bad'}`} data-testid="model-ready">
          {model.ready ? 'ready' : 'not ready'}
        </span>
        <div class="small reason" data-testid="model-reason">
          {readyText(model)}
        </div>
      </td>
      <td data-testid="model-sync">
        {nodes.length === 0 ? (
          <span class="muted small">no node</span>
        ) : (
          nodes.map((n) => {
            const who = n.node_name || n.node;
            const syncing = n.state === 'syncing' || n.sync;
            const p = syncing ? syncProgress(n) : null;
            return (
              <div class="node-state" title={n.reason || ''}>
                <span class="small">{who}</span> <StateBadge state={n.online === false ? 'offline' : n.state} />
                {p && (
                  <div class="sync">
                    <span class="small">{p.text || 'syncing'}</span>
                    {p.total ? <Bar used={p.done} total={p.total} label={`sync on ${who}`} /> : null}
                  </div>
                )}
              </div>
            );
          })
        )}
      </td>
      <td class="actions-cell">
        {!confirming ? (
          <span>
            <button type="button" class="ghost" data-testid="model-unload" title="Unload on every node, keep the files" onClick={unload}>
              Unload
            </button>{' '}
            <button type="button" class="danger ghost" data-testid="model-delete" onClick={() => setConfirming(true)}>
              Delete
            </button>
            {unloaded && <div class="muted small" data-testid="model-unload-note">nodes unload it; the next request loads it again</div>}
          </span>
        ) : (
          <span class="confirm">
            <span class="small">Delete {model.name}?</span>
            <button type="button" class="danger" data-testid="model-delete-confirm" disabled={busy} onClick={remove}>
              {busy ? 'Deleting…' : 'Delete'}
            </button>
            <button type="button" class="ghost" disabled={busy} onClick={() => setConfirming(false)}>
              Cancel
            </button>
          </span>
        )}
        {error && <div class="error small">{error}</div>}
      </td>
    </tr>
  );
}

export function Models({ apiKey, snapshot, live }) {
  const [deleted, setDeleted] = useState([]);
  const models = snapshot && Array.isArray(snapshot.models) ? snapshot.models : [];
  const present = new Set(models.map((m) => m.name));
  // A deleted model stays hidden until a snapshot no longer lists it.
  useEffect(() => {
    if (deleted.some((n) => !present.has(n))) setDeleted((d) => d.filter((n) => present.has(n)));
  }, [snapshot]);
  const shown = models.filter((m) => !deleted.includes(m.name));
  return (
    <div class="stack">
      <RegisterForm apiKey={apiKey} />
      <section class="card">
        <h2>Registered models</h2>
        {!snapshot ? (
          <Waiting live={live} />
        ) : shown.length === 0 ? (
          <p class="muted">No model is registered. Register one above, or with <code>llmr pull</code>.</p>
        ) : (
          <div class="table-wrap">
            <table class="table models-table">
              <thead>
                <tr>
                  <th>Name</th>
                  <th>Source</th>
                  <th>State</th>
                  <th>Nodes</th>
                  <th />
                </tr>
              </thead>
              <tbody>
                {shown.map((m) => (
                  <ModelRow key={m.name} model={m} apiKey={apiKey} onDeleted={(n) => setDeleted((d) => [...d, n])} />
                ))}
              </tbody>
            </table>
          </div>
        )}
      </section>
    </div>
  );
}
