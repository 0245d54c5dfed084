/* Pull-style JSON reader: see json_scan.h. */
#include "common/json_scan.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

#include "common/utf8.h"

void llmr_jscan_init(llmr_jscan *s, const char *text, size_t len)
{
    memset(s, 0, sizeof *s);
    s->start = s->p = text;
    s->end = text + len;
}

void llmr_jscan_fail(llmr_jscan *s, const char *fmt, ...)
{
    if (s->failed)
        return;
    s->failed = true;
    size_t line = 1, col = 1;
    for (const char *q = s->start; q < s->p && q < s->end; q++) {
        if (*q == '\n') {
            line++;
            col = 1;
        } else if (((unsigned char)*q & 0xc0) != 0x80) {
            col++;
        }
    }
    int n = snprintf(s->error, sizeof s->error, "line %zu, column %zu: ", line, col);
    va_list ap;
    va_start(ap, fmt);
    if (n > 0 && (size_t)n < sizeof s->error)
        vsnprintf(s->error + n, sizeof s->error - (size_t)n, fmt, ap);
    va_end(ap);
}

static void skip_ws(llmr_jscan *s)
{
    const char *p = s->p;
    if (p < s->end && (unsigned char)*p > ' ')
        return; /* the common case: already at a token */
#ifdef __SSE2__
    /* Pretty-printed documents are mostly indentation: test 16 bytes at a time. */
    const __m128i sp = _mm_set1_epi8(' '), nl = _mm_set1_epi8('\n'), cr = _mm_set1_epi8('\r'),
                  tab = _mm_set1_epi8('\t');
    while (s->end - p >= 16) {
        __m128i v = _mm_loadu_si128((const __m128i *)p);
        __m128i ws = _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(v, sp), _mm_cmpeq_epi8(v, nl)),
                                  _mm_or_si128(_mm_cmpeq_epi8(v, cr), _mm_cmpeq_epi8(v, tab)));
        unsigned mask = (unsigned)_mm_movemask_epi8(ws) ^ 0xffffu;
        if (mask) {
            s->p = p + __builtin_ctz(mask);
            return;
        }
        p += 16;
    }
#endif
    while (p < s->end && (*p == ' ' || *p == '\n' || *p == '\r' || *p == '\t'))
        p++;
    s->p = p;
}

/* Length of the run of plain string bytes at p: not '"', '\\' or a control character. */
static size_t plain_run(const char *p, const char *end)
{
    const char *q = p;
#ifdef __SSE2__
    const __m128i quote = _mm_set1_epi8('"'), slash = _mm_set1_epi8('\\'),
                  ctl = _mm_set1_epi8(0x1f);
    while (end - q >= 16) {
        __m128i v = _mm_loadu_si128((const __m128i *)q);
        /* Bytes <= 0x1f: unsigned min with 0x1f equals the byte. */
        __m128i low = _mm_cmpeq_epi8(_mm_min_epu8(v, ctl), v);
        __m128i stop = _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(v, quote), _mm_cmpeq_epi8(v, slash)), low);
        unsigned mask = (unsigned)_mm_movemask_epi8(stop);
        if (mask)
            return (size_t)(q - p) + (size_t)__builtin_ctz(mask);
        q += 16;
    }
#endif
    while (q < end && *q != '"' && *q != '\\' && (unsigned char)*q >= 0x20)
        q++;
    return (size_t)(q - p);
}

char llmr_jscan_peek(llmr_jscan *s)
{
    if (s->failed)
        return 0;
    skip_ws(s);
    return s->p < s->end ? *s->p : 0;
}

static bool expect(llmr_jscan *s, char c, const char *what)
{
    if (llmr_jscan_peek(s) != c) {
        llmr_jscan_fail(s, "expected %s", what);
        return false;
    }
    s->p++;
    return true;
}

static bool push(llmr_jscan *s)
{
    if (s->depth + 1 >= LLMR_JSCAN_MAX_DEPTH) {
        llmr_jscan_fail(s, "nesting deeper than %u levels", LLMR_JSCAN_MAX_DEPTH);
        return false;
    }
    s->depth++;
    s->need_comma[s->depth / 64] &= ~(1ull << (s->depth % 64));
    return true;
}

static bool needs_comma(const llmr_jscan *s)
{
    return s->need_comma[s->depth / 64] & (1ull << (s->depth % 64));
}

static void set_needs_comma(llmr_jscan *s)
{
    s->need_comma[s->depth / 64] |= 1ull << (s->depth % 64);
}

bool llmr_jscan_object_begin(llmr_jscan *s)
{
    return expect(s, '{', "'{'") && push(s);
}

bool llmr_jscan_array_begin(llmr_jscan *s)
{
    return expect(s, '[', "'['") && push(s);
}

/* Shared by objects and arrays: handles the comma or the closing bracket. */
static bool next_element(llmr_jscan *s, char close)
{
    char c = llmr_jscan_peek(s);
    if (s->failed)
        return false;
    if (c == close) {
        s->p++;
        s->depth--;
        return false;
    }
    if (needs_comma(s)) {
        if (c != ',') {
            llmr_jscan_fail(s, "expected ',' or '%c'", close);
            return false;
        }
        s->p++;
        if (llmr_jscan_peek(s) == close) {
            llmr_jscan_fail(s, "trailing comma");
            return false;
        }
    }
    set_needs_comma(s);
    return !s->failed;
}

bool llmr_jscan_object_next(llmr_jscan *s, llmr_strbuf *key)
{
    llmr_strbuf_reset(key);
    return llmr_jscan_object_next_into(s, key);
}

bool llmr_jscan_object_next_into(llmr_jscan *s, llmr_strbuf *key)
{
    if (!next_element(s, '}'))
        return false;
    if (llmr_jscan_peek(s) != '"') {
        llmr_jscan_fail(s, "expected a member name");
        return false;
    }
    return llmr_jscan_string(s, key) && expect(s, ':', "':'");
}

bool llmr_jscan_array_next(llmr_jscan *s)
{
    return next_element(s, ']');
}

static int hex4(const char *p)
{
    int v = 0;
    for (int i = 0; i < 4; i++) {
        char c = p[i];
        v <<= 4;
        if (c >= '0' && c <= '9')
            v |= c - '0';
        else if (c >= 'a' && c <= 'f')
            v |= c - 'a' + 10;
        else if (c >= 'A' && c <= 'F')
            v |= c - 'A' + 10;
        else
            return -1;
    }
    return v;
}

static void put_utf8(llmr_strbuf *out, uint32_t cp)
{
    char b[4];
    size_t n;
    if (cp < 0x80) {
        b[0] = (char)cp;
        n = 1;
    } else if (cp < 0x800) {
        b[0] = (char)(0xc0 | (cp >> 6));
        b[1] = (char)(0x80 | (cp & 0x3f));
        n = 2;
    } else if (cp < 0x10000) {
        b[0] = (char)(0xe0 | (cp >> 12));
        b[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
        b[2] = (char)(0x80 | (cp & 0x3f));
        n = 3;
    } else {
        b[0] = (char)(0xf0 | (cp >> 18));
        b[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
        b[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
        b[3] = (char)(0x80 | (cp & 0x3f));
        n = 4;
    }
    llmr_strbuf_append(out, b, n);
}

bool llmr_jscan_string(llmr_jscan *s, llmr_strbuf *out)
{
    if (!expect(s, '"', "a string"))
        return false;
    const char *p = s->p;
    for (;;) {
        const char *run = p;
        p += plain_run(p, s->end);
        if (p > run) {
            size_t bad;
            if (!llmr_utf8_valid(run, (size_t)(p - run), &bad)) {
                s->p = run + bad;
                llmr_jscan_fail(s, "invalid UTF-8 in a string");
                return false;
            }
            llmr_strbuf_append(out, run, (size_t)(p - run));
        }
        if (p >= s->end) {
            s->p = p;
            llmr_jscan_fail(s, "unterminated string");
            return false;
        }
        if (*p == '"') {
            s->p = p + 1;
            break;
        }
        if (*p != '\\') {
            s->p = p;
            llmr_jscan_fail(s, "control character in a string");
            return false;
        }
        if (s->end - p < 2) {
            s->p = p;
            llmr_jscan_fail(s, "unterminated escape");
            return false;
        }
        char e = p[1];
        p += 2;
        const char *simple = strchr("\"\\/bfnrt", e);
        if (e && simple) {
            static const char map[] = "\"\\/\b\f\n\r\t";
            llmr_strbuf_putc(out, map[simple - "\"\\/bfnrt"]);
            continue;
        }
        if (e != 'u' || s->end - p < 4 || hex4(p) < 0) {
            s->p = p - 2;
            llmr_jscan_fail(s, "invalid escape");
            return false;
        }
        uint32_t cp = (uint32_t)hex4(p);
        p += 4;
        if (cp >= 0xd800 && cp <= 0xdbff) {
            int lo = s->end - p >= 6 && p[0] == '\\' && p[1] == 'u' ? hex4(p + 2) : -1;
            if (lo < 0xdc00 || lo > 0xdfff) {
                s->p = p - 6;
                llmr_jscan_fail(s, "lone surrogate in a \\u escape");
                return false;
            }
            cp = 0x10000 + ((cp - 0xd800) << 10) + ((uint32_t)lo - 0xdc00);
            p += 6;
        } else if ((cp >= 0xdc00 && cp <= 0xdfff) || cp == 0) {
            s->p = p - 6;
            llmr_jscan_fail(s, cp ? "lone surrogate in a \\u escape" : "\\u0000 in a string");
            return false;
        }
        put_utf8(out, cp);
    }
    if (llmr_strbuf_failed(out)) {
        llmr_jscan_fail(s, "out of memory");
        return false;
    }
    return true;
}

/* Checks the number grammar at s->p; sets *is_int when it has no fraction/exponent. */
static bool scan_number(llmr_jscan *s, bool *is_int)
{
    const char *p = s->p, *e = s->end;
    *is_int = true;
    if (p < e && *p == '-')
        p++;
    if (p >= e || *p < '0' || *p > '9')
        goto bad;
    if (*p == '0')
        p++;
    else
        while (p < e && *p >= '0' && *p <= '9')
            p++;
    if (p < e && *p == '.') {
        *is_int = false;
        p++;
        if (p >= e || *p < '0' || *p > '9')
            goto bad;
        while (p < e && *p >= '0' && *p <= '9')
            p++;
    }
    if (p < e && (*p == 'e' || *p == 'E')) {
        *is_int = false;
        p++;
        if (p < e && (*p == '+' || *p == '-'))
            p++;
        if (p >= e || *p < '0' || *p > '9')
            goto bad;
        while (p < e && *p >= '0' && *p <= '9')
            p++;
    }
    s->p = p;
    return true;
bad:
    llmr_jscan_fail(s, "malformed number");
    return false;
}

bool llmr_jscan_int(llmr_jscan *s, int64_t *out)
{
    char c = llmr_jscan_peek(s);
    if (c != '-' && (c < '0' || c > '9')) {
        llmr_jscan_fail(s, "expected an integer");
        return false;
    }
    const char *start = s->p;
    bool is_int;
    if (!scan_number(s, &is_int))
        return false;
    if (!is_int) {
        s->p = start;
        llmr_jscan_fail(s, "expected an integer, not a fraction");
        return false;
    }
    bool neg = *start == '-';
    uint64_t v = 0;
    for (const char *q = start + neg; q < s->p; q++) {
        if (v > (UINT64_C(9223372036854775808) - (uint64_t)(*q - '0')) / 10) {
            s->p = start;
            llmr_jscan_fail(s, "integer out of range");
            return false;
        }
        v = v * 10 + (uint64_t)(*q - '0');
    }
    if (!neg && v > INT64_MAX) {
        s->p = start;
        llmr_jscan_fail(s, "integer out of range");
        return false;
    }
    *out = neg ? (int64_t)(0 - v) : (int64_t)v;
    return true;
}

static bool literal(llmr_jscan *s, const char *word)
{
    size_t n = strlen(word);
    if ((size_t)(s->end - s->p) < n || memcmp(s->p, word, n) != 0) {
        llmr_jscan_fail(s, "expected %s", word);
        return false;
    }
    s->p += n;
    return true;
}

bool llmr_jscan_bool(llmr_jscan *s, bool *out)
{
    char c = llmr_jscan_peek(s);
    if (c == 't' && literal(s, "true")) {
        *out = true;
        return true;
    }
    if (c == 'f' && literal(s, "false")) {
        *out = false;
        return true;
    }
    llmr_jscan_fail(s, "expected true or false");
    return false;
}

bool llmr_jscan_null(llmr_jscan *s)
{
    return llmr_jscan_peek(s) == 'n' && literal(s, "null");
}

/* Reads one scalar value (string, number, literal). */
static bool skip_scalar(llmr_jscan *s, char c, llmr_strbuf *scratch)
{
    switch (c) {
    case '"':
        llmr_strbuf_reset(scratch);
        return llmr_jscan_string(s, scratch);
    case 't':
        return literal(s, "true");
    case 'f':
        return literal(s, "false");
    case 'n':
        return literal(s, "null");
    default:
        if (c == '-' || (c >= '0' && c <= '9')) {
            bool is_int;
            return scan_number(s, &is_int);
        }
        llmr_jscan_fail(s, c ? "expected a value" : "unexpected end of input");
        return false;
    }
}

bool llmr_jscan_skip(llmr_jscan *s)
{
    /* Iterative, so hostile nesting costs no stack; the depth cap still applies. */
    const unsigned base = s->depth;
    char kinds[LLMR_JSCAN_MAX_DEPTH]; /* container kind per depth above base */
    llmr_strbuf scratch = LLMR_STRBUF_INIT;
    for (;;) {
        char c = llmr_jscan_peek(s);
        if (c == '{' || c == '[') {
            if (!(c == '{' ? llmr_jscan_object_begin(s) : llmr_jscan_array_begin(s)))
                break;
            kinds[s->depth] = c;
        } else if (!skip_scalar(s, c, &scratch)) {
            break;
        }
        /* Move to the next value inside the open containers, closing finished ones. */
        bool more = false;
        while (s->depth > base && !s->failed) {
            more = kinds[s->depth] == '{' ? llmr_jscan_object_next(s, &scratch)
                                          : llmr_jscan_array_next(s);
            if (more)
                break;
        }
        if (!more || s->failed)
            break;
    }
    llmr_strbuf_free(&scratch);
    return !s->failed;
}

bool llmr_jscan_raw(llmr_jscan *s, const char **text, size_t *len)
{
    llmr_jscan_peek(s);
    const char *begin = s->p;
    if (!llmr_jscan_skip(s))
        return false;
    *text = begin;
    *len = (size_t)(s->p - begin);
    return true;
}

bool llmr_jscan_at_end(llmr_jscan *s)
{
    return llmr_jscan_peek(s) == 0 && !s->failed && s->p == s->end;
}
