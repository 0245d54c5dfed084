// A parser of text/event-stream frames (the HTML standard's rules): fed text as it
// arrives, it returns each event once its blank line has come.  Comments (":") are
// skipped; several data lines join with "\n".
export class SseParser {
  constructor() {
    this.buffer = '';
    this.event = '';
    this.data = [];
  }

  // push(text) -> [{event, data}] completed by this text
  push(text) {
    this.buffer += text;
    const out = [];
    for (;;) {
      const m = /\r\n|\r|\n/.exec(this.buffer);
      if (!m) break;
      // A lone "\r" at the very end may be the first half of "\r\n": wait for more.
      if (m[0] === '\r' && m.index === this.buffer.length - 1) break;
      const line = this.buffer.slice(0, m.index);
      this.buffer = this.buffer.slice(m.index + m[0].length);
      if (line === '') {
        if (this.data.length) out.push({ event: this.event || 'message', data: this.data.join('\n') });
        this.event = '';
        this.data = [];
        continue;
      }
      if (line[0] === ':') continue;
      const colon = line.indexOf(':');
      const field = colon < 0 ? line : line.slice(0, colon);
      let value = colon < 0 ? '' : line.slice(colon + 1);
      if (value[0] === ' ') value = value.slice(1);
      if (field === 'event') this.event = value;
      else if (field === 'data') this.data.push(value);
    }
    return out;
  }
}
