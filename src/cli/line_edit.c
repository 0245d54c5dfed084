/* The terminal chat's line editor: see line_edit.h.  Owns the raw mode of the terminal
 * while a line is read, the edit buffer and the history. */
#include "cli/line_edit.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>
#include <utf8proc.h>

#include "common/strbuf.h"

#define HISTORY_MAX 500

struct llmr_line_editor {
    int in, out;
    bool tty;
    char **history;
    size_t history_len;
    llmr_strbuf pending; /* bytes read past a line's end when not a terminal */
};

llmr_line_editor *llmr_line_editor_new(int in_fd, int out_fd)
{
    llmr_line_editor *e = calloc(1, sizeof *e);
    if (!e)
        return NULL;
    e->in = in_fd;
    e->out = out_fd;
    e->tty = isatty(in_fd) && isatty(out_fd);
    llmr_strbuf_init(&e->pending);
    return e;
}

void llmr_line_editor_free(llmr_line_editor *e)
{
    if (!e)
        return;
    for (size_t i = 0; i < e->history_len; i++)
        free(e->history[i]);
    free(e->history);
    llmr_strbuf_free(&e->pending);
    free(e);
}

bool llmr_line_editor_interactive(const llmr_line_editor *e)
{
    return e->tty;
}

void llmr_line_history_add(llmr_line_editor *e, const char *line)
{
    if (!line[0] || (e->history_len && !strcmp(e->history[e->history_len - 1], line)))
        return;
    char *copy = strdup(line);
    if (!copy)
        return;
    if (e->history_len == HISTORY_MAX) {
        free(e->history[0]);
        memmove(e->history, e->history + 1, (HISTORY_MAX - 1) * sizeof *e->history);
        e->history_len--;
    }
    char **h = realloc(e->history, (e->history_len + 1) * sizeof *h);
    if (!h) {
        free(copy);
        return;
    }
    e->history = h;
    e->history[e->history_len++] = copy;
}

/* ---- without a terminal: lines as they come ---------------------------------------- */

static llmr_line_result read_plain(llmr_line_editor *e, char **line)
{
    for (;;) {
        const char *data = e->pending.len ? llmr_strbuf_cstr(&e->pending) : "";
        const char *nl = memchr(data, '\n', e->pending.len);
        if (nl) {
            size_t n = nl ? (size_t)(nl - data) : 0;
            *line = strndup(data, n && data[n - 1] == '\r' ? n - 1 : n);
            if (!*line)
                return LLMR_LINE_ERROR;
            size_t rest = e->pending.len - n - 1;
            memmove(e->pending.data, data + n + 1, rest);
            e->pending.len = rest;
            e->pending.data[rest] = 0;
            return LLMR_LINE_OK;
        }
        char buf[4096];
        ssize_t got = read(e->in, buf, sizeof buf);
        if (got < 0 && errno == EINTR)
            return LLMR_LINE_INTERRUPTED;
        if (got < 0)
            return LLMR_LINE_ERROR;
        if (got == 0) { /* the last line may lack its newline */
            if (!e->pending.len)
                return LLMR_LINE_EOF;
            if (!llmr_strbuf_append(&e->pending, "\n", 1))
                return LLMR_LINE_ERROR;
            continue;
        }
        if (!llmr_strbuf_append(&e->pending, buf, (size_t)got))
            return LLMR_LINE_ERROR;
    }
}

/* ---- on a terminal: the editor ------------------------------------------------------ */

typedef struct edit {
    llmr_line_editor *e;
    const char *prompt;
    llmr_strbuf buf;
    size_t pos;      /* the cursor, a byte offset at a character's start */
    size_t browsing; /* the history entry shown; history_len: the line being written */
    int cursor_row;  /* the cursor's row below the line's first (a long line wraps) */
    char *scratch;   /* the line being written while the history is browsed */
} edit;

static void out_write(const llmr_line_editor *e, const char *s, size_t n)
{
    while (n) {
        ssize_t w = write(e->out, s, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return;
        s += w;
        n -= (size_t)w;
    }
}

/* Columns s[0..n) takes on the terminal. */
static int columns(const char *s, size_t n)
{
    int cols = 0;
    size_t i = 0;
    while (i < n) {
        utf8proc_int32_t cp;
        utf8proc_ssize_t len = utf8proc_iterate((const utf8proc_uint8_t *)s + i, (utf8proc_ssize_t)(n - i), &cp);
        if (len <= 0) {
            cols++;
            i++;
            continue;
        }
        cols += utf8proc_charwidth(cp);
        i += (size_t)len;
    }
    return cols;
}

/* The terminal's width in columns (80 when it does not say). */
static int terminal_columns(const llmr_line_editor *e)
{
    struct winsize ws;
    if (ioctl(e->out, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0)
        return ws.ws_col;
    return 80;
}

/* Draws the prompt and the line again from the row the line starts on (a line longer
 * than the terminal is wide takes several rows), then puts the cursor at pos. */
static void redraw(edit *ed)
{
    llmr_strbuf s = LLMR_STRBUF_INIT;
    const char *text = ed->buf.len ? llmr_strbuf_cstr(&ed->buf) : "";
    int cols = terminal_columns(ed->e);
    int plen = columns(ed->prompt, strlen(ed->prompt));
    int total = plen + columns(text, ed->buf.len), at = plen + columns(text, ed->pos);
    if (ed->cursor_row > 0)
        llmr_strbuf_printf(&s, "\x1b[%dA", ed->cursor_row);
    llmr_strbuf_puts(&s, "\r");
    llmr_strbuf_puts(&s, ed->prompt);
    llmr_strbuf_append(&s, text, ed->buf.len);
    llmr_strbuf_puts(&s, "\x1b[J");
    int end_row = total / cols;
    if (total > 0 && total % cols == 0) /* the terminal waits to wrap: make it */
        llmr_strbuf_puts(&s, "\r\n");
    int row = at / cols, col = at % cols;
    if (end_row > row)
        llmr_strbuf_printf(&s, "\x1b[%dA", end_row - row);
    llmr_strbuf_puts(&s, "\r");
    if (col > 0)
        llmr_strbuf_printf(&s, "\x1b[%dC", col);
    ed->cursor_row = row;
    if (!llmr_strbuf_failed(&s))
        out_write(ed->e, s.data, s.len);
    llmr_strbuf_free(&s);
}

static bool is_continuation(unsigned char c)
{
    return (c & 0xC0) == 0x80;
}

static size_t prev_char(const edit *ed, size_t pos)
{
    while (pos > 0 && is_continuation((unsigned char)ed->buf.data[--pos]))
        ;
    return pos;
}

static size_t next_char(const edit *ed, size_t pos)
{
    if (pos < ed->buf.len)
        pos++;
    while (pos < ed->buf.len && is_continuation((unsigned char)ed->buf.data[pos]))
        pos++;
    return pos;
}

static void erase(edit *ed, size_t from, size_t to)
{
    if (to <= from)
        return;
    memmove(ed->buf.data + from, ed->buf.data + to, ed->buf.len - to + 1);
    ed->buf.len -= to - from;
    if (ed->pos > from)
        ed->pos = ed->pos >= to ? ed->pos - (to - from) : from;
}

static bool insert(edit *ed, const char *s, size_t n)
{
    size_t old = ed->buf.len;
    if (!llmr_strbuf_append(&ed->buf, s, n)) /* grows by n; then moved into place */
        return false;
    memmove(ed->buf.data + ed->pos + n, ed->buf.data + ed->pos, old - ed->pos);
    memcpy(ed->buf.data + ed->pos, s, n);
    ed->buf.data[ed->buf.len] = 0;
    ed->pos += n;
    return true;
}

static void set_text(edit *ed, const char *text)
{
    llmr_strbuf_reset(&ed->buf);
    llmr_strbuf_puts(&ed->buf, text);
    ed->pos = ed->buf.len;
}

/* Up (-1) or down (+1) the history. */
static void browse(edit *ed, int dir)
{
    llmr_line_editor *e = ed->e;
    if ((dir < 0 && ed->browsing == 0) || (dir > 0 && ed->browsing >= e->history_len))
        return;
    if (ed->browsing == e->history_len) {
        free(ed->scratch);
        ed->scratch = strdup(ed->buf.len ? llmr_strbuf_cstr(&ed->buf) : "");
    }
    ed->browsing = dir < 0 ? ed->browsing - 1 : ed->browsing + 1;
    set_text(ed, ed->browsing < e->history_len ? e->history[ed->browsing] : (ed->scratch ? ed->scratch : ""));
}

static int read_byte(const llmr_line_editor *e)
{
    unsigned char c;
    for (;;) {
        ssize_t n = read(e->in, &c, 1);
        if (n == 1)
            return c;
        if (n < 0 && errno == EINTR)
            continue;
        return -1;
    }
}

/* The rest of an escape sequence after ESC: 'A'..'D' arrows, 'H' Home, 'F' End,
 * '3' Delete; 0 for one not known (read and dropped). */
static int read_escape(const llmr_line_editor *e)
{
    int c = read_byte(e);
    if (c != '[' && c != 'O')
        return 0;
    int d = read_byte(e);
    if (d >= '0' && d <= '9') { /* ESC [ N ~ (or ESC [ 1 ; 5 C and the like) */
        int n = d - '0', last;
        while ((last = read_byte(e)) >= 0 && ((last >= '0' && last <= '9') || last == ';'))
            if (last != ';')
                n = n * 10 + (last - '0');
        if (last != '~')
            return last == 'C' || last == 'D' ? last : 0;
        return n == 1 || n == 7 ? 'H' : n == 4 || n == 8 ? 'F' : n == 3 ? '3' : 0;
    }
    return d;
}

#define KEY_CTRL(c) ((c) & 0x1f)

static llmr_line_result edit_line(llmr_line_editor *e, const char *prompt, char **line)
{
    struct termios saved, raw;
    if (tcgetattr(e->in, &saved) != 0)
        return LLMR_LINE_ERROR;
    raw = saved;
    raw.c_iflag &= ~(tcflag_t)(BRKINT | ICRNL | INPCK | ISTRIP | IXON);
    raw.c_cflag |= CS8;
    raw.c_lflag &= ~(tcflag_t)(ECHO | ICANON | IEXTEN | ISIG);
    raw.c_cc[VMIN] = 1;
    raw.c_cc[VTIME] = 0;
    if (tcsetattr(e->in, TCSANOW, &raw) != 0)
        return LLMR_LINE_ERROR;

    edit ed = {.e = e, .prompt = prompt, .buf = LLMR_STRBUF_INIT, .browsing = e->history_len};
    llmr_line_result result = LLMR_LINE_ERROR;
    redraw(&ed);
    for (;;) {
        int c = read_byte(e);
        if (c < 0) {
            result = LLMR_LINE_EOF;
            break;
        }
        if (c == '\r' || c == '\n') {
            result = LLMR_LINE_OK;
            break;
        }
        if (c == KEY_CTRL('c')) {
            out_write(e, "^C", 2);
            result = LLMR_LINE_INTERRUPTED;
            break;
        }
        if (c == KEY_CTRL('d')) {
            if (!ed.buf.len) {
                result = LLMR_LINE_EOF;
                break;
            }
            erase(&ed, ed.pos, next_char(&ed, ed.pos));
        } else if (c == 0x7f || c == KEY_CTRL('h')) {
            erase(&ed, prev_char(&ed, ed.pos), ed.pos);
        } else if (c == KEY_CTRL('a')) {
            ed.pos = 0;
        } else if (c == KEY_CTRL('e')) {
            ed.pos = ed.buf.len;
        } else if (c == KEY_CTRL('b')) {
            ed.pos = prev_char(&ed, ed.pos);
        } else if (c == KEY_CTRL('f')) {
            ed.pos = next_char(&ed, ed.pos);
        } else if (c == KEY_CTRL('k')) {
            erase(&ed, ed.pos, ed.buf.len);
        } else if (c == KEY_CTRL('u')) {
            erase(&ed, 0, ed.pos);
        } else if (c == KEY_CTRL('w')) {
            size_t p = ed.pos;
            while (p > 0 && ed.buf.data[p - 1] == ' ')
                p--;
            while (p > 0 && ed.buf.data[p - 1] != ' ')
                p--;
            erase(&ed, p, ed.pos);
        } else if (c == KEY_CTRL('p')) {
            browse(&ed, -1);
        } else if (c == KEY_CTRL('n')) {
            browse(&ed, +1);
        } else if (c == KEY_CTRL('l')) {
            out_write(e, "\x1b[H\x1b[2J", 7);
            ed.cursor_row = 0;
        } else if (c == 0x1b) {
            switch (read_escape(e)) {
            case 'A': browse(&ed, -1); break;
            case 'B': browse(&ed, +1); break;
            case 'C': ed.pos = next_char(&ed, ed.pos); break;
            case 'D': ed.pos = prev_char(&ed, ed.pos); break;
            case 'H': ed.pos = 0; break;
            case 'F': ed.pos = ed.buf.len; break;
            case '3': erase(&ed, ed.pos, next_char(&ed, ed.pos)); break;
            default: break;
            }
        } else if (c >= 0x20 || c == '\t') {
            char ch = (char)c;
            if (!insert(&ed, &ch, 1))
                break;
        }
        redraw(&ed);
    }
    if (result == LLMR_LINE_OK || result == LLMR_LINE_INTERRUPTED) {
        ed.pos = ed.buf.len;
        redraw(&ed);
    }
    tcsetattr(e->in, TCSANOW, &saved);
    out_write(e, "\n", 1);
    if (result == LLMR_LINE_OK && !(*line = strdup(ed.buf.len ? llmr_strbuf_cstr(&ed.buf) : "")))
        result = LLMR_LINE_ERROR;
    llmr_strbuf_free(&ed.buf);
    free(ed.scratch);
    return result;
}

llmr_line_result llmr_line_read(llmr_line_editor *e, const char *prompt, char **line)
{
    *line = NULL;
    return e->tty ? edit_line(e, prompt, line) : read_plain(e, line);
}
