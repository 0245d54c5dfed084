// Requests: the newest requests through /v1, from the live snapshots.
import { clock, ms } from '../format.js';
import { Waiting } from './common.jsx';

export function Requests({ snapshot, live }) {
  if (!snapshot) return <Waiting live={live} />;
  const requests = Array.isArray(snapshot.requests) ? snapshot.requests : [];
  const names = new Map((snapshot.nodes || []).map((n) => [n.id, n.name || n.id]));
  const s = snapshot.stats || {};
  return (
    <div class="stack">
      <div class="summary">
        <div class="stat">
          <span class="stat-value">{s.requests ?? '–'}</span>
          <span class="stat-label">requests in the last {s.window_s || 10} s</span>
        </div>
        <div class="stat">
          <span class="stat-value">{s.in_flight ?? '–'}</span>
          <span class="stat-label">in flight</span>
        </div>
        <div class="stat">
          <span class="stat-value">{s.errors ?? '–'}</span>
          <span class="stat-label">errors</span>
        </div>
        <div class="stat">
          <span class="stat-value">{ms(s.ttft_ms_p50)}</span>
          <span class="stat-label">TTFT p50</span>
        </div>
      </div>
      <section class="card">
        {requests.length === 0 ? (
          <p class="muted">No request has come through /v1 yet.</p>
        ) : (
          <div class="table-wrap">
            <table class="table requests-table">
              <thead>
                <tr>
                  <th>Time</th>
                  <th>Model</th>
                  <th>Node</th>
                  <th>Endpoint</th>
                  <th class="num">Tokens in / out</th>
                  <th class="num">TTFT</th>
                  <th class="num">Duration</th>
                  <th>Status</th>
                </tr>
              </thead>
              <tbody>
                {requests.map((r) => {
                  const bad = r.status >= 400 || r.error;
                  return (
                    <tr key={r.id} data-testid="request-row" class={bad ? 'row-bad' : ''}>
                      <td class="nowrap">{clock(r.time_ms)}</td>
                      <td>{r.model || '–'}</td>
                      <td>{r.node ? names.get(r.node) || r.node : '–'}</td>
                      <td>
                        <code>{r.endpoint || '–'}</code>
                      </td>
                      <td class="num nowrap">
                        {r.prompt_tokens ?? 0} / {r.completion_tokens ?? 0}
                      </td>
                      <td class="num nowrap">{ms(r.ttft_ms)}</td>
                      <td class="num nowrap">{ms(r.duration_ms)}</td>
                      <td>
                        <span class={`badge ${bad ? 'badge-bad' : 'badge-ok'}`}>{r.status || '–'}</span>
                        {r.error && <div class="error small">{r.error}</div>}
                      </td>
                    </tr>
                  );
                })}
              </tbody>
            </table>
          </div>
        )}
      </section>
    </div>
  );
}
