// API keys: create one with its scopes (the secret is shown once, with copy and
// close), the list with each key's state and revoke.
import { useEffect, useRef, useState } from 'preact/hooks';
import { api } from '../api.js';
import { dateTime } from '../format.js';

const SCOPES = [
  { id: 'inference', what: '/v1: chat and completions' },
  { id: 'node', what: 'a node’s registration, heartbeats and files' },
  { id: 'admin', what: 'everything, this dashboard included' },
];

function SecretPanel({ created, onClose }) {
  const ref = useRef(null);
  const [copied, setCopied] = useState('');
  const copy = async () => {
    try {
      await navigator.clipboard.writeText(created.secret);
      setCopied('Copied.');
    } catch {
      // No clipboard access: select the text so that the operator can copy it.
      const sel = window.getSelection();
      const range = document.createRange();
      range.selectNodeContents(ref.current);
      sel.removeAllRanges();
      sel.addRange(range);
      setCopied('Selected: copy it with Ctrl+C.');
    }
  };
  return (
    <div class="card secret" role="dialog" aria-label="The new key's secret">
      <h2>Key “{created.name || created.id}” created</h2>
      <p>Copy its secret now: the router keeps only a hash and will not show it again.</p>
      <div class="secret-line">
        <code class="secret-text" data-testid="key-secret" ref={ref}>{created.secret}</code>
      </div>
      <div class="actions">
        <button type="button" class="primary" data-testid="key-secret-copy" onClick={copy}>
          Copy
        </button>
        <button type="button" class="ghost" data-testid="key-secret-close" onClick={onClose}>
          Close
        </button>
        {copied && <span class="ok-text small">{copied}</span>}
      </div>
    </div>
  );
}

const REFUSED = 'The router no longer accepts this key (401): was it revoked? Sign in again.';

export function Keys({ apiKey, onSignOut }) {
  const [keys, setKeys] = useState(null);
  const [listError, setListError] = useState('');
  const [name, setName] = useState('');
  const [scopes, setScopes] = useState({ inference: true, node: false, admin: false });
  const [createError, setCreateError] = useState('');
  const [busy, setBusy] = useState(false);
  const [created, setCreated] = useState(null);
  const [revoking, setRevoking] = useState('');

  const load = async () => {
    try {
      const r = await api.keys(apiKey);
      setKeys(Array.isArray(r.keys) ? r.keys : []);
      setListError('');
    } catch (err) {
      if (err.status === 401) onSignOut(REFUSED);
      else setListError(err.message || String(err));
    }
  };
  useEffect(() => {
    load();
  }, [apiKey]);

  const create = async (e) => {
    e.preventDefault();
    setCreateError('');
    const chosen = SCOPES.filter((s) => scopes[s.id]).map((s) => s.id);
    if (!chosen.length) {
      setCreateError('Choose at least one scope.');
      return;
    }
    setBusy(true);
    try {
      const k = await api.createKey(apiKey, name.trim(), chosen.join(','));
      setCreated(k);
      setName('');
      load();
    } catch (err) {
      setCreateError(err.message || String(err));
    } finally {
      setBusy(false);
    }
  };

  const revoke = async (id) => {
    setRevoking(id);
    try {
      await api.revokeKey(apiKey, id);
      await load();
    } catch (err) {
      if (err.status === 401) return onSignOut(REFUSED);
      setListError(err.message || String(err));
    } finally {
      setRevoking('');
    }
  };

  return (
    <div class="stack">
      {created ? (
        <SecretPanel created={created} onClose={() => setCreated(null)} />
      ) : (
        <form class="card form" onSubmit={create}>
          <h2>Create a key</h2>
          <div class="grid-form">
            <label class="wide">
              Name
              <input
                data-testid="key-create-name"
                value={name}
                placeholder="e.g. web-app, gpu-node-3"
                onInput={(e) => setName(e.currentTarget.value)}
                autocomplete="off"
              />
            </label>
          </div>
          <fieldset class="scopes">
            <legend>Scopes</legend>
            {SCOPES.map((s) => (
              <label class="check">
                <input
                  type="checkbox"
                  data-testid={`key-create-scope-${s.id}`}
                  checked={scopes[s.id]}
                  onChange={(e) => setScopes({ ...scopes, [s.id]: e.currentTarget.checked })}
                />
                <span>
                  <strong>{s.id}</strong> <span class="muted small">{s.what}</span>
                </span>
              </label>
            ))}
          </fieldset>
          <div class="actions">
            <button type="submit" class="primary" data-testid="key-create-submit" disabled={busy}>
              {busy ? 'Creating…' : 'Create key'}
            </button>
            {createError && (
              <span class="error" role="alert">
                {createError}
              </span>
            )}
          </div>
        </form>
      )}
      <section class="card">
        <h2>Keys</h2>
        {listError && (
          <p class="error" role="alert">
            {listError}
          </p>
        )}
        {keys === null ? (
          !listError && <p class="muted">Loading…</p>
        ) : keys.length === 0 ? (
          <p class="muted">No keys.</p>
        ) : (
          <div class="table-wrap">
            <table class="table">
              <thead>
                <tr>
                  <th>Name</th>
                  <th>Id</th>
                  <th>Scopes</th>
                  <th>Created</th>
                  <th>Last used</th>
                  <th>State</th>
                  <th />
                </tr>
              </thead>
              <tbody>
                {keys.map((k) => (
                  <tr key={k.id} data-testid="key-row" data-key-id={k.id} class={k.revoked ? 'revoked' : ''}>
                    <td>{k.name || <span class="muted">–</span>}</td>
                    <td>
                      <code>{k.id}</code>
                    </td>
                    <td>{k.scopes}</td>
                    <td class="nowrap">{dateTime(k.created)}</td>
                    <td class="nowrap">{k.last_used ? dateTime(k.last_used) : <span class="muted">never</span>}</td>
                    <td>
                      <span class={`badge ${k.revoked ? 'badge-bad' : 'badge-ok'}`} data-testid="key-state">
                        {k.revoked ? 'revoked' : 'active'}
                      </span>
                    </td>
                    <td>
                      {!k.revoked && (
                        <button
                          type="button"
                          class="danger ghost"
                          data-testid="key-revoke"
                          disabled={revoking === k.id}
                          onClick={() => revoke(k.id)}
                        >
                          {revoking === k.id ? 'Revoking…' : 'Revoke'}
                        </button>
                      )}
                    </td>
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
        )}
      </section>
    </div>
  );
}
