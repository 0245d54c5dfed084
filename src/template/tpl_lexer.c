/* The lexer of the template renderer: source -> tokens, with jinja2's whitespace rules as
 * Hugging Face configures them (trim_blocks, lstrip_blocks, `-` and `+` on tags).
 *
 * As jinja2 does, the source's line breaks (\r\n, \r, \n) become "\n" first and one
 * final newline is dropped.  Text between tags becomes TEXT
 * tokens already stripped; each tag becomes BEGIN, its expression tokens, END; comments
 * vanish; {% raw %} bodies become TEXT. */
#include <ctype.h>
#include <stdio.h>
#include <string.h>

#include "template/tpl_internal.h"

typedef struct lexer {
    tpl_arena *a;
    const char *src;
    size_t len, pos;
    uint32_t line, col; /* of pos (kept by advance) */
    size_t lc_pos;
    tpl_tokens *out;
    char *err;
    size_t err_size;
    bool failed;
} lexer;

static void where(lexer *L, size_t at, uint32_t *line, uint32_t *col)
{
    if (at < L->lc_pos) { /* recount from the start (errors only) */
        L->lc_pos = 0;
        L->line = 1;
        L->col = 1;
    }
    for (; L->lc_pos < at; L->lc_pos++) {
        if (L->src[L->lc_pos] == '\n') {
            L->line++;
            L->col = 1;
        } else if (((unsigned char)L->src[L->lc_pos] & 0xC0) != 0x80) {
            L->col++;
        }
    }
    *line = L->line;
    *col = L->col;
}

static bool fail(lexer *L, size_t at, const char *msg)
{
    uint32_t line, col;
    where(L, at, &line, &col);
    if (!L->failed)
        snprintf(L->err, L->err_size, "line %u, column %u: %s", line, col, msg);
    L->failed = true;
    return false;
}

static tpl_token *push(lexer *L, tpl_tok_type type, size_t at, const char *s, size_t n)
{
    tpl_tokens *o = L->out;
    if (o->n == o->cap) {
        size_t cap = o->cap ? o->cap * 2 : 256;
        tpl_token *t = tpl_alloc(L->a, cap * sizeof *t);
        if (!t)
            return NULL;
        if (o->n)
            memcpy(t, o->t, o->n * sizeof *t);
        o->t = t;
        o->cap = cap;
    }
    tpl_token *t = &o->t[o->n++];
    memset(t, 0, sizeof *t);
    t->type = type;
    t->s = s;
    t->n = n;
    where(L, at, &t->line, &t->col);
    return t;
}

static bool is_ws(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

/* ---- newlines ------------------------------------------------------------------- */

/* The length of a line break at s[i] (0: none): \r\n, \r or \n, as jinja2's lexer
 * splits (other Unicode line breaks stay as they are). */
static size_t line_break(const char *s, size_t n, size_t i)
{
    if (s[i] == '\r')
        return i + 1 < n && s[i + 1] == '\n' ? 2 : 1;
    return s[i] == '\n';
}

static char *normalize_newlines(tpl_arena *a, const char *s, size_t n, size_t *out_n)
{
    char *d = tpl_alloc(a, n + 1);
    if (!d)
        return NULL;
    size_t o = 0;
    for (size_t i = 0; i < n;) {
        size_t b = line_break(s, n, i);
        if (b) {
            d[o++] = '\n';
            i += b;
        } else {
            d[o++] = s[i++];
        }
    }
    if (o && d[o - 1] == '\n')
        o--;
    d[o] = 0;
    *out_n = o;
    return d;
}

/* ---- text and tags --------------------------------------------------------------- */

static bool starts(const lexer *L, size_t at, const char *lit)
{
    size_t n = strlen(lit);
    return at + n <= L->len && memcmp(L->src + at, lit, n) == 0;
}

/* Pushes text [from, to) after the strip the next tag asks for: sign '-' strips all
 * whitespace at its end; lstrip (block and comment tags without a sign) strips the
 * blanks of its last line when only blanks precede the tag on that line. */
static bool push_text(lexer *L, size_t from, size_t to, char sign, bool lstrip, bool line_starting)
{
    if (sign == '-') {
        while (to > from && is_ws(L->src[to - 1]))
            to--;
    } else if (sign != '+' && lstrip) {
        size_t l = to;
        while (l > from && L->src[l - 1] != '\n')
            l--;
        bool blank = true;
        for (size_t i = l; i < to; i++)
            if (!is_ws(L->src[i]))
                blank = false;
        if (blank && (l > from || line_starting))
            to = l;
    }
    if (to > from && !push(L, TK_TEXT, from, L->src + from, to - from))
        return false;
    return true;
}

/* After a tag's end at `at` (just past it): sign '-' skips whitespace; trim (blocks
 * and comments without '+') skips one newline.  Returns the new position. */
static size_t after_end(const lexer *L, size_t at, char sign, bool trim)
{
    if (sign == '-') {
        while (at < L->len && is_ws(L->src[at]))
            at++;
    } else if (sign != '+' && trim && at < L->len && L->src[at] == '\n') {
        at++;
    }
    return at;
}

/* ---- expression tokens ------------------------------------------------------------- */

static int hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

static void put_utf8(char *d, size_t *o, uint32_t cp)
{
    if (cp < 0x80) {
        d[(*o)++] = (char)cp;
    } else if (cp < 0x800) {
        d[(*o)++] = (char)(0xC0 | (cp >> 6));
        d[(*o)++] = (char)(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
        d[(*o)++] = (char)(0xE0 | (cp >> 12));
        d[(*o)++] = (char)(0x80 | ((cp >> 6) & 0x3F));
        d[(*o)++] = (char)(0x80 | (cp & 0x3F));
    } else {
        d[(*o)++] = (char)(0xF0 | (cp >> 18));
        d[(*o)++] = (char)(0x80 | ((cp >> 12) & 0x3F));
        d[(*o)++] = (char)(0x80 | ((cp >> 6) & 0x3F));
        d[(*o)++] = (char)(0x80 | (cp & 0x3F));
    }
}

/* A string literal's body [s, s+n) unescaped as Python's unicode-escape: \n \t \\ \'
 * \" \a \b \f \v \r \ooo \xhh \uhhhh \Uhhhhhhhh; other escapes stay as written. */
static bool unescape(lexer *L, size_t at, const char *s, size_t n, tpl_token *t)
{
    char *d = tpl_alloc(L->a, n + 1);
    if (!d)
        return false;
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] != '\\' || i + 1 == n) {
            d[o++] = s[i];
            continue;
        }
        char c = s[++i];
        switch (c) {
        case 'n': d[o++] = '\n'; break;
        case 't': d[o++] = '\t'; break;
        case 'r': d[o++] = '\r'; break;
        case 'a': d[o++] = '\a'; break;
        case 'b': d[o++] = '\b'; break;
        case 'f': d[o++] = '\f'; break;
        case 'v': d[o++] = '\v'; break;
        case '\\': d[o++] = '\\'; break;
        case '\'': d[o++] = '\''; break;
        case '"': d[o++] = '"'; break;
        case '\n': break; /* a line continuation */
        case 'x': case 'u': case 'U': {
            int digits = c == 'x' ? 2 : c == 'u' ? 4 : 8;
            uint32_t cp = 0;
            for (int k = 0; k < digits; k++) {
                int h = i + 1 + k < n ? hexval(s[i + 1 + k]) : -1;
                if (h < 0)
                    return fail(L, at, "a string literal has a truncated \\x, \\u or \\U escape");
                cp = cp * 16 + (uint32_t)h;
            }
            if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
                return fail(L, at, "a string literal escapes a code point that is not a character");
            i += (size_t)digits;
            put_utf8(d, &o, cp);
            break;
        }
        default:
            if (c >= '0' && c <= '7') {
                uint32_t cp = 0;
                int k = 0;
                while (k < 3 && i < n && s[i] >= '0' && s[i] <= '7') {
                    cp = cp * 8 + (uint32_t)(s[i] - '0');
                    i++;
                    k++;
                }
                i--;
                put_utf8(d, &o, cp);
            } else {
                d[o++] = '\\';
                d[o++] = c;
            }
        }
    }
    d[o] = 0;
    t->s = d;
    t->n = o;
    return true;
}

static const char *const OPS[] = {"//", "**", "==", "!=", "<=", ">=", "+", "-", "*", "/", "%",
                                  "~", "<", ">", "=", "(", ")", "[", "]", "{", "}", ",", ".",
                                  ":", "|", ";"};

/* Tokens of one tag up to its end ("}}" or "%}"); returns the position after the end
 * and its sign ('-', '+' or 0) in *sign. */
static bool lex_tag(lexer *L, bool block, size_t *pos, char *sign)
{
    const char *end = block ? "%}" : "}}";
    size_t p = *pos;
    int depth = 0; /* brackets: an end inside them is not the end (jinja2's balancing) */
    for (;;) {
        while (p < L->len && is_ws(L->src[p]))
            p++;
        if (p >= L->len)
            return fail(L, p, block ? "a {% tag is not closed (no %})" : "a {{ tag is not closed (no }})");
        if (depth == 0) {
            char c = L->src[p];
            if ((c == '-' || c == '+') && starts(L, p + 1, end)) {
                *sign = c;
                *pos = p + 3;
                return push(L, block ? TK_BLOCK_END : TK_VAR_END, p, NULL, 0) != NULL;
            }
            if (starts(L, p, end)) {
                *sign = 0;
                *pos = p + 2;
                return push(L, block ? TK_BLOCK_END : TK_VAR_END, p, NULL, 0) != NULL;
            }
        }
        char c = L->src[p];
        if (isalpha((unsigned char)c) || c == '_') {
            size_t s = p;
            while (p < L->len && (isalnum((unsigned char)L->src[p]) || L->src[p] == '_'))
                p++;
            if (!push(L, TK_NAME, s, L->src + s, p - s))
                return false;
        } else if (isdigit((unsigned char)c)) {
            size_t s = p;
            bool is_float = false;
            while (p < L->len && (isdigit((unsigned char)L->src[p]) || L->src[p] == '_'))
                p++;
            if (p + 1 < L->len && L->src[p] == '.' && isdigit((unsigned char)L->src[p + 1])) {
                is_float = true;
                p++;
                while (p < L->len && (isdigit((unsigned char)L->src[p]) || L->src[p] == '_'))
                    p++;
            }
            if (p < L->len && (L->src[p] == 'e' || L->src[p] == 'E')) {
                size_t q = p + 1;
                if (q < L->len && (L->src[q] == '+' || L->src[q] == '-'))
                    q++;
                if (q < L->len && isdigit((unsigned char)L->src[q])) {
                    is_float = true;
                    p = q;
                    while (p < L->len && isdigit((unsigned char)L->src[p]))
                        p++;
                }
            }
            char buf[64];
            size_t k = 0;
            for (size_t i = s; i < p && k < sizeof buf - 1; i++)
                if (L->src[i] != '_')
                    buf[k++] = L->src[i];
            buf[k] = 0;
            tpl_token *t = push(L, is_float ? TK_FLOAT : TK_INT, s, L->src + s, p - s);
            if (!t)
                return false;
            if (is_float) {
                t->f = strtod(buf, NULL);
            } else {

                t->i = 0;
                for (size_t i = 0; buf[i]; i++) {
                    int d = buf[i] - '0';
                    if (t->i > (INT64_MAX - d) / 10)
                        return fail(L, s, "an integer literal is too large (beyond 64 bits)");
                    t->i = t->i * 10 + d;
                }
            }
        } else if (c == '\'' || c == '"') {
            size_t s = p++;
            while (p < L->len && L->src[p] != c) {
                if (L->src[p] == '\\')
                    p++;
                p++;
            }
            if (p >= L->len)
                return fail(L, s, "a string literal is not closed");
            tpl_token *t = push(L, TK_STRING, s, NULL, 0);
            if (!t || !unescape(L, s, L->src + s + 1, p - s - 1, t))
                return false;
            p++;
        } else {
            size_t k = 0, nops = sizeof OPS / sizeof *OPS;
            for (; k < nops; k++)
                if (starts(L, p, OPS[k]))
                    break;
            if (k == nops) {
                char msg[64];
                snprintf(msg, sizeof msg, "unexpected character '%c'", isprint((unsigned char)c) ? c : '?');
                return fail(L, p, msg);
            }
            size_t n = strlen(OPS[k]);
            if (!push(L, TK_OP, p, L->src + p, n))
                return false;
            if (OPS[k][0] == '(' || OPS[k][0] == '[' || OPS[k][0] == '{')
                depth++;
            else if ((OPS[k][0] == ')' || OPS[k][0] == ']' || OPS[k][0] == '}') && depth > 0)
                depth--;
            p += n;
        }
    }
}

/* {% raw %} at `begin` (the position of "{%"), already known to be one: its body up to
 * {% endraw %} as TEXT.  Returns false on error; *pos past the endraw tag. */
static bool lex_raw(lexer *L, size_t tag_end, char raw_sign, size_t *pos, bool *line_starting)
{
    size_t p = after_end(L, tag_end, raw_sign, false);
    for (size_t q = p; q + 1 < L->len; q++) {
        if (L->src[q] != '{' || L->src[q + 1] != '%')
            continue;
        size_t r = q + 2;
        char sign = 0;
        if (r < L->len && (L->src[r] == '-' || L->src[r] == '+'))
            sign = L->src[r++];
        while (r < L->len && is_ws(L->src[r]))
            r++;
        if (!starts(L, r, "endraw"))
            continue;
        r += 6;
        while (r < L->len && is_ws(L->src[r]))
            r++;
        char esign = 0;
        if (r < L->len && (L->src[r] == '-' || L->src[r] == '+'))
            esign = L->src[r++];
        if (!starts(L, r, "%}"))
            continue;
        if (!push_text(L, p, q, sign, true, *line_starting))
            return false;
        size_t after = after_end(L, r + 2, esign, true);
        *line_starting = after > 0 && L->src[after - 1] == '\n';
        *pos = after;
        return true;
    }
    return fail(L, tag_end, "{% raw %} without {% endraw %}");
}

bool tpl_lex(tpl_arena *a, const char *src, size_t len, tpl_tokens *out, char *err, size_t err_size)
{
    lexer L = {0};
    L.a = a;
    L.out = out;
    L.err = err;
    L.err_size = err_size;
    L.line = 1;
    L.col = 1;
    memset(out, 0, sizeof *out);
    L.src = normalize_newlines(a, src, len, &L.len);
    if (!L.src)
        return fail(&L, 0, "out of memory");
    size_t pos = 0;
    bool line_starting = true;
    while (pos < L.len) {
        /* the next tag opener */
        size_t q = pos;
        int kind = 0; /* 1 {{, 2 {%, 3 {# */
        for (; q + 1 < L.len; q++) {
            if (L.src[q] != '{')
                continue;
            char c = L.src[q + 1];
            kind = c == '{' ? 1 : c == '%' ? 2 : c == '#' ? 3 : 0;
            if (kind)
                break;
        }
        if (!kind) {
            if (!push_text(&L, pos, L.len, 0, false, line_starting))
                return false;
            break;
        }
        size_t p = q + 2;
        char sign = 0;
        if (p < L.len && (L.src[p] == '-' || L.src[p] == '+'))
            sign = L.src[p++];
        /* {% raw %}? */
        if (kind == 2) {
            size_t r = p;
            while (r < L.len && is_ws(L.src[r]))
                r++;
            if (starts(&L, r, "raw") && !(r + 3 < L.len && (isalnum((unsigned char)L.src[r + 3]) || L.src[r + 3] == '_'))) {
                size_t e = r + 3;
                while (e < L.len && is_ws(L.src[e]))
                    e++;
                char rs = 0;
                if (e < L.len && L.src[e] == '-')
                    rs = L.src[e++];
                if (starts(&L, e, "%}")) {
                    if (!push_text(&L, pos, q, sign, true, line_starting))
                        return false;
                    if (!lex_raw(&L, e + 2, rs, &pos, &line_starting))
                        return false;
                    continue;
                }
            }
        }
        if (!push_text(&L, pos, q, sign, kind != 1, line_starting))
            return false;
        if (kind == 3) {
            size_t e = p;
            while (e + 1 < L.len && !(L.src[e] == '#' && L.src[e + 1] == '}'))
                e++;
            if (e + 1 >= L.len)
                return fail(&L, q, "a {# comment is not closed (no #})");
            char es = e > p && (L.src[e - 1] == '-' || L.src[e - 1] == '+') ? L.src[e - 1] : 0;
            pos = after_end(&L, e + 2, es, true);
        } else {
            if (!push(&L, kind == 1 ? TK_VAR_BEGIN : TK_BLOCK_BEGIN, q, NULL, 0))
                return false;
            char es = 0;
            size_t e = p;
            if (!lex_tag(&L, kind == 2, &e, &es))
                return false;
            pos = after_end(&L, e, es, kind == 2);
        }
        line_starting = pos > 0 && L.src[pos - 1] == '\n';
    }
    return push(&L, TK_EOF, L.len, NULL, 0) != NULL;
}
