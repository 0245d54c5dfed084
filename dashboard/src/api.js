// The router's API as the dashboard calls it: the admin key kept for this tab
// (sessionStorage), sent as a bearer token on every call; answers as JSON; failures
// as ApiError with the router's message and, for a model's file checks, its files.
const KEY_ITEM = 'llmr.dashboard.key';

export function storedKey() {
  try {
    return sessionStorage.getItem(KEY_ITEM) || '';
  } catch {
    return '';
  }
}

export function storeKey(key) {
  try {
    if (key) sessionStorage.setItem(KEY_ITEM, key);
    else sessionStorage.removeItem(KEY_ITEM);
  } catch {
    /* storage refused (private mode): the key then lives only in memory */
  }
}

export class ApiError extends Error {
  constructor(status, message, body) {
    super(message);
    this.status = status;
    this.body = body;
    const files = body && body.error && body.error.files;
    this.files = Array.isArray(files) ? files : [];
  }
}

function statusWords(status) {
  switch (status) {
    case 400: return 'the request was refused';
    case 401: return 'the key was refused';
    case 403: return 'the key lacks the scope this needs';
    case 404: return 'not found';
    case 409: return 'conflict';
    case 413: return 'the request is too large';
    case 429: return 'too many requests';
    case 503: return 'no node can serve it now';
    case 504: return 'timed out waiting for a node';
    default: return 'the router answered an error';
  }
}

// request(key, method, path, body?, {signal}) -> the parsed JSON answer (or {} when empty)
export async function request(key, method, path, body, opts = {}) {
  const headers = { Authorization: `Bearer ${key}` };
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  let res;
  try {
    res = await fetch(path, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
      signal: opts.signal,
      cache: 'no-store',
    });
  } catch (e) {
    if (e && e.name === 'AbortError') throw e;
    throw new ApiError(0, 'The router cannot be reached (is it running?).', null);
  }
  const text = await res.text();
  let json = null;
  try {
    json = text ? JSON.parse(text) : {};
  } catch {
    json = null;
  }
  if (!res.ok) {
    const msg = (json && json.error && (json.error.message || json.error)) || text.trim() || statusWords(res.status);
    throw new ApiError(res.status, `${res.status}: ${typeof msg === 'string' ? msg : statusWords(res.status)}`, json);
  }
  return json || {};
}

export const api = {
  keys: (key) => request(key, 'GET', '/v0/keys'),
  createKey: (key, name, scopes) => request(key, 'POST', '/v0/keys', { name, scopes }),
  revokeKey: (key, id) => request(key, 'DELETE', `/v0/keys/${encodeURIComponent(id)}`),
  registerModel: (key, body) => request(key, 'POST', '/v0/models', body),
  deleteModel: (key, name) => request(key, 'DELETE', `/v0/models/${encodeURIComponent(name)}`),
  unloadModel: (key, name) => request(key, 'POST', `/v0/models/${encodeURIComponent(name)}/unload`),
  render: (key, name, body) => request(key, 'POST', `/v0/models/${encodeURIComponent(name)}/render`, body),
};
