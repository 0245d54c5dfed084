// The one live connection: GET /v0/events read with fetch() (EventSource cannot send
// the Authorization header), its frames parsed as they arrive; each `snapshot` event
// goes to onSnapshot.  When the stream fails or ends, it reconnects after a backoff
// (0.5 s doubling to 10 s, with jitter; back to 0.5 s once a snapshot arrives).  A
// stream silent for longer than STALE_MS counts as failed.  401/403 stop it for good.
import { SseParser } from './sse.js';

const FIRST_DELAY_MS = 500;
const MAX_DELAY_MS = 10000;
const STALE_MS = 30000;

export class LiveConnection {
  // handlers: onSnapshot(snapshot), onState({state: 'connecting'|'live'|'reconnecting', detail, retryAt}),
  //           onRefused(status)
  constructor(key, handlers) {
    this.key = key;
    this.h = handlers;
    this.stopped = false;
    this.ctrl = null;
    this.timer = null;
  }

  start() {
    this.loop();
  }

  stop() {
    this.stopped = true;
    if (this.ctrl) this.ctrl.abort();
    clearTimeout(this.timer);
  }

  state(state, detail = '', retryAt = 0) {
    if (!this.stopped) this.h.onState({ state, detail, retryAt });
  }

  async loop() {
    let delay = FIRST_DELAY_MS;
    let first = true;
    while (!this.stopped) {
      this.state(first ? 'connecting' : 'reconnecting', '');
      first = false;
      let detail = '';
      try {
        const got = await this.once();
        if (got) delay = FIRST_DELAY_MS;
        detail = 'the stream ended';
      } catch (e) {
        if (this.stopped) return;
        if (e && e.refused) {
          this.stopped = true;
          this.h.onRefused(e.refused);
          return;
        }
        detail = e && e.name === 'AbortError' ? 'no data for a while' : (e && e.message) || String(e);
      }
      if (this.stopped) return;
      const wait = Math.round(delay * (0.8 + 0.4 * Math.random()));
      this.state('reconnecting', detail, Date.now() + wait);
      await new Promise((resolve) => {
        this.timer = setTimeout(resolve, wait);
      });
      delay = Math.min(delay * 2, MAX_DELAY_MS);
    }
  }

  // One connection; resolves when the stream ends (true if a snapshot came), throws on failure.
  async once() {
    const ctrl = new AbortController();
    this.ctrl = ctrl;
    let stale = null;
    const arm = () => {
      clearTimeout(stale);
      stale = setTimeout(() => ctrl.abort(), STALE_MS);
    };
    arm();
    let got = false;
    try {
      let res;
      try {
        res = await fetch('/v0/events', {
          headers: { Authorization: `Bearer ${this.key}`, Accept: 'text/event-stream' },
          cache: 'no-store',
          signal: ctrl.signal,
        });
      } catch (e) {
        if (e && e.name === 'AbortError') throw e;
        throw new Error('the router cannot be reached');
      }
      if (res.status === 401 || res.status === 403) {
        const err = new Error(`HTTP ${res.status}`);
        err.refused = res.status;
        throw err;
      }
      if (!res.ok || !res.body) throw new Error(`GET /v0/events answered ${res.status}`);
      const reader = res.body.getReader();
      const decoder = new TextDecoder();
      const parser = new SseParser();
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        arm();
        for (const ev of parser.push(decoder.decode(value, { stream: true }))) {
          if (ev.event !== 'snapshot') continue;
          let snap;
          try {
            snap = JSON.parse(ev.data);
          } catch {
            continue; /* a frame cut short: the next one replaces it */
          }
          got = true;
          this.state('live');
          this.h.onSnapshot(snap);
        }
      }
      return got;
    } finally {
      clearTimeout(stale);
      if (this.ctrl === ctrl) this.ctrl = null;
    }
  }
}
