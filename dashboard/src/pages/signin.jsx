// Sign-in: the admin key is checked with GET /v0/keys (200: an admin key; 401: a key
// the router does not know; 403: a key without the admin scope).
import { useState } from 'preact/hooks';
import { request } from '../api.js';

export function SignIn({ onSignIn, message }) {
  const [key, setKey] = useState('');
  const [error, setError] = useState(message || '');
  const [busy, setBusy] = useState(false);

  const submit = async (e) => {
    e.preventDefault();
    const k = key.trim();
    if (!k) {
      setError('Enter the router’s admin key.');
      return;
    }
    setBusy(true);
    setError('');
    try {
      await request(k, 'GET', '/v0/keys');
      onSignIn(k);
    } catch (err) {
      if (err.status === 401) setError('Wrong key: the router does not know this key (401).');
      else if (err.status === 403)
        setError('This is not an admin key (403): the dashboard needs a key with the admin scope.');
      else setError(err.message || String(err));
      setBusy(false);
    }
  };

  return (
    <div class="signin-page">
      <form class="card signin" onSubmit={submit}>
        <div class="signin-brand">
          <img src="/dashboard/favicon.svg" alt="" width="32" height="32" />
          <h1>llmr</h1>
        </div>
        <p class="muted">Sign in with the router’s admin key. It is kept in this tab only.</p>
        <label for="signin-key">Admin key</label>
        <input
          id="signin-key"
          type="password"
          autocomplete="current-password"
          data-testid="signin-key"
          value={key}
          onInput={(e) => setKey(e.currentTarget.value)}
          autofocus
        />
        <button type="submit" class="primary" data-testid="signin-submit" disabled={busy}>
          {busy ? 'Checking…' : 'Sign in'}
        </button>
        <p class="error" data-testid="signin-error" role="alert" hidden={!error}>
          {error}
        </p>
      </form>
    </div>
  );
}
