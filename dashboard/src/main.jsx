// The dashboard's entry: sign-in, the hash routes, and the one live connection whose
// snapshots feed every page.
import 'uplot/dist/uPlot.min.css';
import './app.css';
import { render } from 'preact';
import { useEffect, useState, useCallback } from 'preact/hooks';
import { storedKey, storeKey } from './api.js';
import { LiveConnection } from './live.js';
import { appendHistory, historyPoint } from './stats.js';
import { SignIn } from './pages/signin.jsx';
import { Nodes } from './pages/nodes.jsx';
import { Models } from './pages/models.jsx';
import { Keys } from './pages/keys.jsx';
import { Requests } from './pages/requests.jsx';
import { Charts } from './pages/charts.jsx';
import { Playground } from './pages/playground.jsx';

const PAGES = [
  { id: 'nodes', title: 'Nodes', Page: Nodes },
  { id: 'models', title: 'Models', Page: Models },
  { id: 'keys', title: 'API keys', Page: Keys },
  { id: 'requests', title: 'Requests', Page: Requests },
  { id: 'charts', title: 'Charts', Page: Charts },
  { id: 'playground', title: 'Playground', Page: Playground },
];

function routeFromHash() {
  const id = (location.hash || '').replace(/^#\/?/, '').split(/[/?]/)[0];
  return PAGES.some((p) => p.id === id) ? id : 'nodes';
}

function useRoute() {
  const [route, setRoute] = useState(routeFromHash());
  useEffect(() => {
    const on = () => setRoute(routeFromHash());
    window.addEventListener('hashchange', on);
    return () => window.removeEventListener('hashchange', on);
  }, []);
  return route;
}

function LiveStatus({ live }) {
  const [now, setNow] = useState(Date.now());
  useEffect(() => {
    if (live.state !== 'reconnecting' || !live.retryAt) return undefined;
    const t = setInterval(() => setNow(Date.now()), 500);
    return () => clearInterval(t);
  }, [live.state, live.retryAt]);
  let text = live.state;
  if (live.state === 'connecting') text = 'connecting…';
  if (live.state === 'reconnecting') {
    const s = live.retryAt ? Math.max(0, Math.ceil((live.retryAt - now) / 1000)) : 0;
    text = s > 0 ? `reconnecting in ${s} s` : 'reconnecting…';
  }
  const title = live.state === 'live' ? 'Live updates from the router' : live.detail || 'Waiting for the router';
  return (
    <span class={`live live-${live.state}`} title={title} role="status">
      <span class="live-dot" aria-hidden="true" />
      <span data-testid="live-status">{text}</span>
    </span>
  );
}

function Shell({ apiKey, onSignOut }) {
  const route = useRoute();
  const [snapshot, setSnapshot] = useState(null);
  const [history, setHistory] = useState([]);
  const [live, setLive] = useState({ state: 'connecting', detail: '', retryAt: 0 });
  const [menuOpen, setMenuOpen] = useState(false);

  useEffect(() => {
    const conn = new LiveConnection(apiKey, {
      onSnapshot: (s) => {
        setSnapshot(s);
        setHistory((h) => appendHistory(h, historyPoint(s)));
      },
      onState: setLive,
      onRefused: (status) =>
        onSignOut(
          status === 401
            ? 'The router no longer accepts this key (401): sign in again.'
            : 'This key is not an admin key (403): sign in with one that has the admin scope.'
        ),
    });
    conn.start();
    return () => conn.stop();
  }, [apiKey]);

  useEffect(() => setMenuOpen(false), [route]);

  const current = PAGES.find((p) => p.id === route) || PAGES[0];
  const Page = current.Page;
  useEffect(() => {
    document.title = `${current.title} · llmr`;
  }, [current]);

  return (
    <div class="shell">
      <header class="top">
        <a class="brand" href="#/nodes">
          <img src="/dashboard/favicon.svg" alt="" width="22" height="22" />
          <span>llmr</span>
        </a>
        <button
          class="menu-toggle"
          type="button"
          aria-controls="nav"
          aria-expanded={menuOpen ? 'true' : 'false'}
          aria-label="Menu"
          onClick={() => setMenuOpen(!menuOpen)}
        >
          <span class="menu-icon" aria-hidden="true" />
        </button>
        <nav id="nav" class={menuOpen ? 'nav open' : 'nav'}>
          {PAGES.map((p) => (
            <a
              href={`#/${p.id}`}
              data-testid={`nav-${p.id}`}
              class={p.id === route ? 'active' : ''}
              aria-current={p.id === route ? 'page' : undefined}
              onClick={() => setMenuOpen(false)}
            >
              {p.title}
            </a>
          ))}
        </nav>
        <div class="top-right">
          <LiveStatus live={live} />
          <button type="button" class="ghost" data-testid="signout" onClick={() => onSignOut('')}>
            Sign out
          </button>
        </div>
      </header>
      <main class="content">
        <h1>{current.title}</h1>
        <Page apiKey={apiKey} snapshot={snapshot} history={history} live={live} onSignOut={onSignOut} />
      </main>
    </div>
  );
}

function App() {
  const [key, setKey] = useState(storedKey());
  const [message, setMessage] = useState('');
  const signIn = useCallback((k) => {
    storeKey(k);
    setMessage('');
    setKey(k);
  }, []);
  const signOut = useCallback((why) => {
    storeKey('');
    setKey('');
    setMessage(why || '');
  }, []);
  if (!key) return <SignIn onSignIn={signIn} message={message} />;
  return <Shell apiKey={key} onSignOut={signOut} />;
}

render(<App />, document.getElementById('app'));
