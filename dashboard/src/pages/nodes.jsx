// Nodes: a card per node with its state, GPU, memory, models, load and throughput.
import { bytes, ms, rate, ago } from '../format.js';
import { nodeTokensPerSecond } from '../stats.js';
import { Bar, StateBadge, Waiting } from './common.jsx';

function gpuText(info) {
  const gpus = (info && Array.isArray(info.gpus) && info.gpus) || [];
  if (!gpus.length) return 'CPU only';
  const counts = new Map();
  for (const g of gpus) {
    const name = (g && (g.name || g.model)) || 'GPU';
    counts.set(name, (counts.get(name) || 0) + 1);
  }
  return [...counts].map(([name, n]) => (n > 1 ? `${n} × ${name}` : name)).join(', ');
}

function nodeState(n) {
  if (!n.online) return 'offline';
  if (n.drained) return 'drained';
  return 'online';
}

function NodeCard({ node, snapshot }) {
  const m = node.metrics || {};
  const info = node.info || {};
  const state = nodeState(node);
  const ramTotal = m.ram_total || info.ram_total || 0;
  const models = Array.isArray(node.models) ? node.models : [];
  const inFlight = m.in_flight != null ? m.in_flight : node.outstanding || 0;
  return (
    <article class={`card node node-${state}`} data-testid="node-card" data-node-id={node.id}>
      <header class="node-head">
        <div class="node-title">
          <h2>{node.name || node.id}</h2>
          <span class="muted small">{node.url}</span>
        </div>
        <span class={`badge badge-${state === 'online' ? 'ok' : state === 'drained' ? 'warn' : 'bad'}`} data-testid="node-status">
          {state}
        </span>
      </header>
      <dl class="facts">
        <dt>GPU</dt>
        <dd data-testid="node-gpu">{gpuText(info)}</dd>
        <dt>VRAM</dt>
        <dd>
          <Bar used={m.vram_used} total={m.vram_total} testid="node-vram-bar" label="VRAM used" />
          <span class="small">{m.vram_total ? `${bytes(m.vram_used)} / ${bytes(m.vram_total)}` : 'none'}</span>
        </dd>
        <dt>RAM</dt>
        <dd>
          <Bar used={m.ram_used} total={ramTotal} testid="node-ram-bar" label="RAM used" />
          <span class="small">{ramTotal ? `${bytes(m.ram_used)} / ${bytes(ramTotal)}` : '–'}</span>
        </dd>
        <dt>In flight</dt>
        <dd data-testid="node-inflight">
          {inFlight}
          {node.outstanding != null && node.outstanding !== inFlight ? (
            <span class="muted small"> ({node.outstanding} from this router)</span>
          ) : null}
        </dd>
        <dt>Tokens/s</dt>
        <dd data-testid="node-tps">{rate(nodeTokensPerSecond(snapshot, node))}</dd>
        <dt>TTFT</dt>
        <dd>{node.ttft_ms != null ? ms(node.ttft_ms) : '–'}</dd>
        <dt>Seen</dt>
        <dd>{ago(node.last_seen_ms_ago)}{info.version ? <span class="muted small"> · llmr {info.version}</span> : null}</dd>
      </dl>
      <div class="node-models" data-testid="node-models">
        {models.length === 0 ? (
          <span class="muted small">no models</span>
        ) : (
          <ul>
            {models.map((mm) => (
              <li title={mm.reason || ''}>
                <span class="model-name">{mm.name}</span> <StateBadge state={mm.state} />
                {mm.loaded && (
                  <span class="muted small" data-testid="node-model-loaded">
                    {' '}
                    loaded · {bytes(mm.vram_bytes || mm.ram_bytes || 0)} · {mm.running || 0} running
                  </span>
                )}
              </li>
            ))}
          </ul>
        )}
      </div>
    </article>
  );
}

export function Nodes({ snapshot, live }) {
  if (!snapshot) return <Waiting live={live} />;
  const nodes = Array.isArray(snapshot.nodes) ? snapshot.nodes : [];
  if (!nodes.length)
    return (
      <p class="muted">
        No node has registered yet. Start one with <code>llmr node --router URL --node-key KEY</code>.
      </p>
    );
  return (
    <div class="cards">
      {nodes.map((n) => (
        <NodeCard key={n.id} node={n} snapshot={snapshot} />
      ))}
    </div>
  );
}
