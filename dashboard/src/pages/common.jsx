// Pieces shared by the pages.
import { percent } from '../format.js';

// A horizontal bar; its width is set through the CSSOM (allowed by the page's CSP,
// which refuses style attributes in markup).
export function Bar({ used, total, testid, label }) {
  const p = percent(used, total);
  const level = p >= 90 ? 'high' : p >= 70 ? 'mid' : 'low';
  return (
    <div
      class={`bar bar-${level}`}
      data-testid={testid}
      role="progressbar"
      aria-label={label}
      aria-valuemin="0"
      aria-valuemax="100"
      aria-valuenow={String(Math.round(p))}
    >
      <div class="bar-fill" style={{ width: `${p.toFixed(1)}%` }} />
    </div>
  );
}

export function Waiting({ live }) {
  return (
    <p class="muted waiting">
      {live && live.state === 'reconnecting'
        ? `Waiting for the router (${live.detail || 'reconnecting'})…`
        : 'Waiting for the first update from the router…'}
    </p>
  );
}

export function StateBadge({ state }) {
  const cls =
    state === 'ready' || state === 'online' || state === 'active'
      ? 'ok'
      : state === 'failed' || state === 'offline' || state === 'revoked' || state === 'not_ready'
        ? 'bad'
        : 'warn';
  return <span class={`badge badge-${cls}`}>{String(state || 'unknown').replace(/_/g, ' ')}</span>;
}
