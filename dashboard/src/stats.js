// Figures computed in the browser from the snapshots.
export const WINDOW_MS = 10000;
export const HISTORY_S = 300;

// Tokens per second of one node: the completion tokens of the snapshot's requests that
// this node served and that ended in the last 10 s (the same window as the router's
// own stats), over 10 s.
export function nodeTokensPerSecond(snapshot, node) {
  if (!snapshot || !Array.isArray(snapshot.requests)) return 0;
  const now = snapshot.time_ms || Date.now();
  let tokens = 0;
  for (const r of snapshot.requests) {
    if (r.node !== node.id && r.node !== node.name) continue;
    const end = (r.time_ms || 0) + (r.duration_ms || 0);
    if (end >= now - WINDOW_MS && end <= now + 1000) tokens += r.completion_tokens || 0;
  }
  return tokens / (WINDOW_MS / 1000);
}

// One point of the charts' history from a snapshot.
export function historyPoint(snapshot) {
  const s = snapshot.stats || {};
  const num = (v) => (typeof v === 'number' && isFinite(v) ? v : null);
  return {
    t: (snapshot.time_ms || Date.now()) / 1000,
    tps: num(s.tokens_per_s) ?? 0,
    p50: num(s.ttft_ms_p50),
    p90: num(s.ttft_ms_p90),
    dur50: num(s.duration_ms_p50),
    inFlight: num(s.in_flight) ?? 0,
  };
}

// The history with point appended and anything older than HISTORY_S dropped (a clock
// that went back starts it afresh).
export function appendHistory(history, point) {
  const last = history.length ? history[history.length - 1] : null;
  let out = last && point.t < last.t ? [] : history.slice();
  if (last && point.t === last.t) out.pop();
  out.push(point);
  const since = point.t - HISTORY_S;
  let drop = 0;
  while (drop < out.length && out[drop].t < since) drop++;
  return drop ? out.slice(drop) : out;
}
