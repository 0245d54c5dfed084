// Charts: tokens/s and time to first token (p50, p90) over the last 5 minutes, from
// the history of snapshots the browser keeps (uPlot).
import { useEffect, useRef } from 'preact/hooks';
import uPlot from 'uplot';
import { HISTORY_S } from '../stats.js';
import { Waiting } from './common.jsx';

const HEIGHT = 240;
const MIN_SPAN_S = 60;

function css(name, fallback) {
  const v = getComputedStyle(document.documentElement).getPropertyValue(name).trim();
  return v || fallback;
}

function Chart({ testid, title, history, series, unit }) {
  const box = useRef(null);
  const plot = useRef(null);

  const data = () => [history.map((p) => p.t), ...series.map((s) => history.map((p) => p[s.key]))];

  useEffect(() => {
    const el = box.current;
    const axis = css('--muted', '#8b93a1');
    const grid = css('--grid', 'rgba(128,128,128,0.15)');
    const opts = {
      width: Math.max(200, el.clientWidth),
      height: HEIGHT,
      legend: { show: true },
      cursor: { drag: { x: false, y: false } },
      scales: {
        x: {
          time: true,
          // Up to the last 5 minutes; at least one minute while the history is shorter.
          range: (u, min, max) => {
            const hi = Math.max(max || 0, Date.now() / 1000);
            const lo = Math.max(hi - HISTORY_S, Math.min(min == null ? hi : min, hi - MIN_SPAN_S));
            return [lo, hi];
          },
        },
        y: { range: (u, min, max) => [0, Math.max(1, (max || 0) * 1.15)] },
      },
      axes: [
        { stroke: axis, grid: { stroke: grid }, ticks: { stroke: grid } },
        {
          stroke: axis,
          grid: { stroke: grid },
          ticks: { stroke: grid },
          size: 56,
          values: (u, vals) => vals.map((v) => `${+v.toFixed(1)}${unit}`),
        },
      ],
      series: [
        {},
        ...series.map((s) => ({
          label: s.label,
          stroke: css(s.color, '#4f8cff'),
          width: 2,
          spanGaps: false,
          value: (u, v) => (v == null ? '–' : `${+v.toFixed(1)}${unit}`),
        })),
      ],
    };
    plot.current = new uPlot(opts, data(), el);
    const ro = new ResizeObserver(() => {
      const w = Math.max(200, el.clientWidth);
      if (plot.current && Math.abs(plot.current.width - w) > 1) plot.current.setSize({ width: w, height: HEIGHT });
    });
    ro.observe(el);
    return () => {
      ro.disconnect();
      plot.current.destroy();
      plot.current = null;
    };
  }, []);

  useEffect(() => {
    if (plot.current) plot.current.setData(data());
  }, [history]);

  return (
    <section class="card chart-card">
      <h2>{title}</h2>
      <div class="chart" data-testid={testid} ref={box} role="img" aria-label={title} />
    </section>
  );
}

export function Charts({ history, snapshot, live }) {
  return (
    <div class="stack">
      {!snapshot && <Waiting live={live} />}
      <Chart
        testid="chart-tokens"
        title="Tokens per second (all nodes, 10 s window)"
        history={history}
        unit=""
        series={[{ key: 'tps', label: 'tokens/s', color: '--accent' }]}
      />
      <Chart
        testid="chart-latency"
        title="Time to first token"
        history={history}
        unit=" ms"
        series={[
          { key: 'p50', label: 'p50', color: '--accent' },
          { key: 'p90', label: 'p90', color: '--warn' },
        ]}
      />
      <p class="muted small">The last 5 minutes, kept in this tab since it opened; one point per update from the router.</p>
    </div>
  );
}
