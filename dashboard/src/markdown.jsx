// A small markdown renderer for the playground's answers.  It builds preact elements
// from the model's text and never HTML: every piece of text reaches the page as a text
// node, so nothing the model writes can become markup or script (the router's CSP
// would refuse it anyway).  Blocks: paragraphs (a single newline is a line break),
// headings, fenced code blocks (``` or ~~~, an unclosed fence runs to the end, as while
// it streams), bullet and numbered lists.  Inline: `code`, **bold** and __bold__,
// *italic* and _italic_, and [links](url) whose URL is http or https (any other is
// shown as the text it was).

const FENCE = /^ {0,3}(```+|~~~+)\s*([\w.+#-]*)[^`]*$/;
const HEADING = /^ {0,3}(#{1,6})\s+(.*?)(?:\s+#+)?\s*$/;
const BULLET = /^ {0,3}[-*+]\s+(.*)$/;
const ORDERED = /^ {0,3}(\d{1,9})[.)]\s+(.*)$/;

const startsBlock = (line) => FENCE.test(line) || HEADING.test(line) || BULLET.test(line) || ORDERED.test(line);

// parseBlocks(text) -> [{type: 'code'|'heading'|'list'|'paragraph', ...}]
export function parseBlocks(text) {
  const lines = String(text || '').replace(/\r\n?/g, '\n').split('\n');
  const blocks = [];
  let i = 0;
  while (i < lines.length) {
    const line = lines[i];
    const fence = FENCE.exec(line);
    if (fence) {
      const mark = fence[1];
      const body = [];
      i++;
      while (i < lines.length) {
        const close = lines[i].trim();
        if (close[0] === mark[0] && close.length >= mark.length && /^(`+|~+)$/.test(close)) break;
        body.push(lines[i]);
        i++;
      }
      i++; // the closing fence, or the end
      blocks.push({ type: 'code', lang: fence[2], text: body.join('\n') });
      continue;
    }
    if (!line.trim()) {
      i++;
      continue;
    }
    const h = HEADING.exec(line);
    if (h) {
      blocks.push({ type: 'heading', level: h[1].length, text: h[2] });
      i++;
      continue;
    }
    const o = ORDERED.exec(line);
    if (o || BULLET.test(line)) {
      const re = o ? ORDERED : BULLET;
      const items = [];
      while (i < lines.length) {
        const m = re.exec(lines[i]);
        if (m) {
          items.push(o ? m[2] : m[1]);
          i++;
        } else if (/^\s+\S/.test(lines[i]) && !startsBlock(lines[i])) {
          items[items.length - 1] += '\n' + lines[i].trim(); // an indented continuation
          i++;
        } else break;
      }
      blocks.push({ type: 'list', ordered: !!o, start: o ? parseInt(o[1], 10) : 1, items });
      continue;
    }
    const para = [];
    while (i < lines.length && lines[i].trim() && (para.length === 0 || !startsBlock(lines[i]))) {
      para.push(lines[i]);
      i++;
    }
    blocks.push({ type: 'paragraph', text: para.join('\n') });
  }
  return blocks;
}

// A link's URL when it is http or https, else null.
export function safeUrl(url) {
  try {
    const u = new URL(url);
    return u.protocol === 'http:' || u.protocol === 'https:' ? u.href : null;
  } catch {
    return null;
  }
}

// One alternative per inline form; the earliest match wins, and at one place the first
// alternative (so ** before *).
const INLINE =
  /`([^`\n]+)`|\[([^\]\n]+)\]\(([^()\s]+)\)|\*\*([^\s*](?:[^]*?\S)?)\*\*|__([^\s_](?:[^]*?\S)?)__|\*([^\s*](?:[^*]*?[^\s*])?)\*|\b_([^\s_](?:[^_]*?[^\s_])?)_\b|(\n)/g;

// inline(text) -> an array of strings and elements
export function inline(text) {
  const out = [];
  let last = 0;
  for (const m of String(text).matchAll(INLINE)) {
    if (m.index > last) out.push(text.slice(last, m.index));
    last = m.index + m[0].length;
    if (m[1] !== undefined) out.push(<code>{m[1]}</code>);
    else if (m[2] !== undefined) {
      const href = safeUrl(m[3]);
      if (href)
        out.push(
          <a href={href} target="_blank" rel="noopener noreferrer nofollow">
            {inline(m[2])}
          </a>
        );
      else out.push(...['[', ...inline(m[2]), `](${m[3]})`]);
    } else if (m[4] !== undefined || m[5] !== undefined) out.push(<strong>{inline(m[4] ?? m[5])}</strong>);
    else if (m[6] !== undefined || m[7] !== undefined) out.push(<em>{inline(m[6] ?? m[7])}</em>);
    else out.push(<br />);
  }
  if (last < text.length) out.push(text.slice(last));
  return out;
}

function Block({ block }) {
  switch (block.type) {
    case 'code':
      return (
        <pre class="md-code">
          <code data-lang={block.lang || undefined}>{block.text}</code>
        </pre>
      );
    case 'heading': {
      const H = `h${Math.min(block.level + 2, 6)}`;
      return <H class="md-heading">{inline(block.text)}</H>;
    }
    case 'list': {
      const items = block.items.map((t) => <li>{inline(t)}</li>);
      return block.ordered ? <ol start={block.start === 1 ? undefined : block.start}>{items}</ol> : <ul>{items}</ul>;
    }
    default:
      return <p>{inline(block.text)}</p>;
  }
}

export function Markdown({ text }) {
  return parseBlocks(text).map((b) => <Block block={b} />);
}
