/* PCRE2-backed regexes for tokenizer patterns: see regex.h. */
#define _GNU_SOURCE /* memmem */
#define PCRE2_CODE_UNIT_WIDTH 8
#include "tokenizer/regex.h"

#include "common/utf8.h"

#include <pcre2.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define MATCH_LIMIT 10000000u
#define DEPTH_LIMIT 100000u
#define JIT_STACK_MAX (8u << 20)

struct llmr_regex {
    pcre2_code *code;
    bool jit;
};

/* Oniguruma's \s (Unicode White_Space) and \w, spelled for PCRE2. */
static const char WS_CLASS[] =
    "\\t\\n\\x{0B}\\f\\r \\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}"
    "\\x{202F}\\x{205F}\\x{3000}";
static const char WORD_CLASS[] = "\\p{L}\\p{M}\\p{Nd}\\p{Pc}";
static const char HEX_CLASS[] = "0-9a-fA-F";

static bool is_hex(char c)
{
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

void llmr_regex_translate(const char *p, size_t n, llmr_strbuf *out)
{
    bool in_class = false;
    size_t i = 0;
    while (i < n) {
        char c = p[i];
        if (c == '\\' && i + 1 < n) {
            char e = p[i + 1];
            if (e == 'Q') { /* quoted run: copy through \E */
                const char *q = memmem(p + i + 2, n - i - 2, "\\E", 2);
                size_t stop = q ? (size_t)(q - p) + 2 : n;
                llmr_strbuf_append(out, p + i, stop - i);
                i = stop;
                continue;
            }
            if (e == 'u' && i + 6 <= n && is_hex(p[i + 2]) && is_hex(p[i + 3]) &&
                is_hex(p[i + 4]) && is_hex(p[i + 5])) {
                llmr_strbuf_puts(out, "\\x{");
                llmr_strbuf_append(out, p + i + 2, 4);
                llmr_strbuf_putc(out, '}');
                i += 6;
                continue;
            }
            const char *cls = e == 's' || e == 'S' ? WS_CLASS
                              : e == 'w' || e == 'W' ? WORD_CLASS
                              : e == 'h' || e == 'H' ? HEX_CLASS
                                                     : NULL;
            bool negated = e == 'S' || e == 'W' || e == 'H';
            if (cls && !in_class) {
                llmr_strbuf_puts(out, negated ? "[^" : "[");
                llmr_strbuf_puts(out, cls);
                llmr_strbuf_putc(out, ']');
            } else if (cls && !negated) {
                llmr_strbuf_puts(out, cls); /* inside a class: splice the members in */
            } else {
                llmr_strbuf_append(out, p + i, 2); /* \S \W \H inside a class: PCRE2's own */
            }
            i += 2;
            continue;
        }
        if (!in_class && c == '[') {
            in_class = true;
            llmr_strbuf_putc(out, c);
            i++;
            if (i < n && p[i] == '^')
                llmr_strbuf_putc(out, p[i++]);
            if (i < n && p[i] == ']') /* a leading ']' is a member */
                llmr_strbuf_putc(out, p[i++]);
            continue;
        }
        if (in_class && c == '[' && i + 1 < n && p[i + 1] == ':') { /* [:alpha:] */
            const char *q = memmem(p + i + 2, n - i - 2, ":]", 2);
            size_t stop = q ? (size_t)(q - p) + 2 : i + 1;
            llmr_strbuf_append(out, p + i, stop - i);
            i = stop;
            continue;
        }
        if (in_class && c == ']')
            in_class = false;
        llmr_strbuf_putc(out, c);
        i++;
    }
}

static char *quote_literal(const char *p, size_t n, size_t *out_len)
{
    llmr_strbuf sb = LLMR_STRBUF_INIT;
    for (size_t i = 0; i < n; i++) {
        if (strchr("\\^$.|?*+()[]{}", p[i]) && p[i])
            llmr_strbuf_putc(&sb, '\\');
        llmr_strbuf_putc(&sb, p[i]);
    }
    *out_len = sb.len;
    return llmr_strbuf_take(&sb);
}

bool llmr_regex_replace_all(const llmr_regex *re, const char *text, size_t len, const char *with,
                            size_t with_len, llmr_strbuf *out, llmr_strbuf *err)
{
    size_t pos = 0, copied = 0;
    while (pos <= len) {
        size_t s, e;
        int r = llmr_regex_find(re, text, len, pos, &s, &e, err);
        if (r < 0)
            return false;
        if (r == 0)
            break;
        llmr_strbuf_append(out, text + copied, s - copied);
        llmr_strbuf_append(out, with, with_len);
        copied = pos = e;
        if (e == s) { /* empty match: keep the next character and step over it */
            if (e >= len)
                break;
            size_t k = llmr_utf8_char_len((const unsigned char *)text + e, len - e);
            k = k ? k : 1;
            llmr_strbuf_append(out, text + e, k);
            copied = pos = e + k;
        }
    }
    if (copied < len)
        llmr_strbuf_append(out, text + copied, len - copied);
    return !llmr_strbuf_failed(out);
}

llmr_regex *llmr_regex_compile(const char *pattern, size_t len, bool literal, llmr_strbuf *err)
{
    size_t n;
    char *text;
    if (literal) {
        text = quote_literal(pattern, len, &n);
    } else {
        llmr_strbuf sb = LLMR_STRBUF_INIT;
        llmr_regex_translate(pattern, len, &sb);
        n = sb.len;
        text = llmr_strbuf_take(&sb);
    }
    if (!text) {
        llmr_strbuf_puts(err, "out of memory");
        return NULL;
    }
    int code;
    PCRE2_SIZE offset;
    /* \C would match one byte of a UTF-8 character and split it: refused (Oniguruma,
     * which Hugging Face tokenizers uses, has no such escape either). */
    pcre2_code *re = pcre2_compile((PCRE2_SPTR)text, n, PCRE2_UTF | PCRE2_UCP | PCRE2_NEVER_BACKSLASH_C,
                                   &code, &offset, NULL);
    free(text);
    if (!re) {
        PCRE2_UCHAR msg[256];
        pcre2_get_error_message(code, msg, sizeof msg);
        llmr_strbuf_printf(err, "%s (at offset %zu of the rewritten pattern)", (char *)msg,
                           (size_t)offset);
        return NULL;
    }
    llmr_regex *r = calloc(1, sizeof *r);
    if (!r) {
        pcre2_code_free(re);
        llmr_strbuf_puts(err, "out of memory");
        return NULL;
    }
    r->code = re;
    r->jit = pcre2_jit_compile(re, PCRE2_JIT_COMPLETE) == 0;
    return r;
}

void llmr_regex_free(llmr_regex *r)
{
    if (!r)
        return;
    pcre2_code_free(r->code);
    free(r);
}

/* Per-thread matching state: match data for one pair, a context with limits, and a
 * JIT stack that grows to JIT_STACK_MAX. */
typedef struct thread_state {
    pcre2_match_data *md;
    pcre2_match_context *mc;
    pcre2_jit_stack *stack;
} thread_state;

static pthread_key_t state_key;
static pthread_once_t state_once = PTHREAD_ONCE_INIT;

static void free_state(void *p)
{
    thread_state *t = p;
    if (!t)
        return;
    pcre2_match_data_free(t->md);
    pcre2_match_context_free(t->mc);
    pcre2_jit_stack_free(t->stack);
    free(t);
}

static void make_key(void)
{
    pthread_key_create(&state_key, free_state);
}

static thread_state *get_state(void)
{
    pthread_once(&state_once, make_key);
    thread_state *t = pthread_getspecific(state_key);
    if (t)
        return t;
    t = calloc(1, sizeof *t);
    if (!t)
        return NULL;
    t->md = pcre2_match_data_create(1, NULL);
    t->mc = pcre2_match_context_create(NULL);
    t->stack = pcre2_jit_stack_create(32 * 1024, JIT_STACK_MAX, NULL);
    if (!t->md || !t->mc || !t->stack) {
        free_state(t);
        return NULL;
    }
    pcre2_set_match_limit(t->mc, MATCH_LIMIT);
    pcre2_set_depth_limit(t->mc, DEPTH_LIMIT);
    pcre2_jit_stack_assign(t->mc, NULL, t->stack);
    pthread_setspecific(state_key, t);
    return t;
}

int llmr_regex_find(const llmr_regex *r, const char *subject, size_t len, size_t from,
                    size_t *start, size_t *end, llmr_strbuf *err)
{
    thread_state *t = get_state();
    if (!t) {
        llmr_strbuf_puts(err, "out of memory for regex matching");
        return -1;
    }
    int rc;
    if (r->jit)
        rc = pcre2_jit_match(r->code, (PCRE2_SPTR)subject, len, from, PCRE2_NO_UTF_CHECK, t->md, t->mc);
    else
        rc = pcre2_match(r->code, (PCRE2_SPTR)subject, len, from, PCRE2_NO_UTF_CHECK, t->md, t->mc);
    if (rc == PCRE2_ERROR_NOMATCH)
        return 0;
    if (rc < 0) {
        PCRE2_UCHAR msg[256];
        pcre2_get_error_message(rc, msg, sizeof msg);
        llmr_strbuf_printf(err, "regex matching failed: %s", (char *)msg);
        return -1;
    }
    PCRE2_SIZE *ov = pcre2_get_ovector_pointer(t->md);
    *start = ov[0];
    *end = ov[1];
    return 1;
}
