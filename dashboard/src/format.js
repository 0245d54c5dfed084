// Small formatting helpers shared by the pages.
export function bytes(n) {
  if (n == null || !isFinite(n)) return '–';
  const units = ['B', 'KB', 'MB', 'GB', 'TB'];
  let i = 0;
  let v = Number(n);
  while (v >= 1000 && i < units.length - 1) {
    v /= 1000;
    i++;
  }
  return `${v >= 100 || i === 0 ? Math.round(v) : v.toFixed(1)} ${units[i]}`;
}

export function ms(v) {
  if (v == null || !isFinite(v)) return '–';
  if (v >= 10000) return `${(v / 1000).toFixed(1)} s`;
  if (v >= 100) return `${Math.round(v)} ms`;
  return `${Number(v).toFixed(1)} ms`;
}

export function rate(v) {
  if (v == null || !isFinite(v)) return '–';
  return v >= 100 ? `${Math.round(v)}` : Number(v).toFixed(1);
}

export function percent(used, total) {
  if (!total || used == null) return 0;
  return Math.max(0, Math.min(100, (100 * used) / total));
}

function pad(n) {
  return String(n).padStart(2, '0');
}

export function clock(timeMs) {
  if (!timeMs) return '–';
  const d = new Date(timeMs);
  return `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`;
}

export function dateTime(unixSeconds) {
  if (!unixSeconds) return '–';
  const d = new Date(unixSeconds * 1000);
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ${pad(d.getHours())}:${pad(d.getMinutes())}`;
}

export function ago(msAgo) {
  if (msAgo == null || !isFinite(msAgo)) return '–';
  if (msAgo < 1000) return 'just now';
  if (msAgo < 60000) return `${Math.round(msAgo / 1000)} s ago`;
  if (msAgo < 3600000) return `${Math.round(msAgo / 60000)} min ago`;
  return `${Math.round(msAgo / 3600000)} h ago`;
}
