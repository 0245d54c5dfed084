/* Request text stays text in a chat's render: see chat_text.h. */
#define _GNU_SOURCE /* memmem */
#include "template/chat_text.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "template/chat_format.h"

/* U+10FFFD, a private-use character: the placeholders' marker. */
#define MARK "\xF4\x8F\xBF\xBD"
#define MARK_LEN 4

typedef struct guard_token {
    char *text;
    size_t len;
} guard_token;

/* A piece of a token that a request string's edge may hold: token tok's first k bytes
 * (an end of a string) or last k bytes (a start of one), 0 < k < its length. */
typedef struct guard_part {
    uint32_t tok, k;
} guard_part;

struct llmr_chat_guard {
    guard_token *v;
    size_t n, cap;
    size_t *by_byte[256]; /* indexes into v, longest first */
    size_t by_byte_n[256];
    /* by the byte a string's edge has there: the token starts whose last byte it is
     * (for a string's end), the token ends whose first byte it is (for its start) */
    guard_part *starts[256], *ends[256];
    size_t starts_n[256], ends_n[256];
};

static void drop_index(llmr_chat_guard *g)
{
    for (size_t b = 0; b < 256; b++) {
        free(g->by_byte[b]);
        free(g->starts[b]);
        free(g->ends[b]);
        g->by_byte[b] = NULL;
        g->starts[b] = g->ends[b] = NULL;
        g->by_byte_n[b] = g->starts_n[b] = g->ends_n[b] = 0;
    }
}

/* The edge pieces, by byte (see struct llmr_chat_guard). */
static bool build_parts(llmr_chat_guard *g)
{
    for (int pass = 0; pass < 2; pass++) {
        for (size_t i = 0; i < g->n; i++)
            for (size_t k = 1; k < g->v[i].len; k++) {
                const char *t = g->v[i].text;
                unsigned char sb = (unsigned char)t[k - 1], eb = (unsigned char)t[g->v[i].len - k];
                if (pass == 0) {
                    g->starts_n[sb]++;
                    g->ends_n[eb]++;
                    continue;
                }
                g->starts[sb][g->starts_n[sb]++] = (guard_part){(uint32_t)i, (uint32_t)k};
                g->ends[eb][g->ends_n[eb]++] = (guard_part){(uint32_t)i, (uint32_t)k};
            }
        if (pass == 1)
            break;
        for (size_t b = 0; b < 256; b++) {
            if ((g->starts_n[b] && !(g->starts[b] = malloc(g->starts_n[b] * sizeof(guard_part)))) ||
                (g->ends_n[b] && !(g->ends[b] = malloc(g->ends_n[b] * sizeof(guard_part)))))
                return false;
            g->starts_n[b] = g->ends_n[b] = 0;
        }
    }
    return true;
}

void llmr_chat_guard_free(llmr_chat_guard *g)
{
    if (!g)
        return;
    for (size_t i = 0; i < g->n; i++)
        free(g->v[i].text);
    free(g->v);
    drop_index(g);
    free(g);
}

size_t llmr_chat_guard_count(const llmr_chat_guard *g)
{
    return g ? g->n : 0;
}

/* The per-first-byte lists, longest token first (so the scan takes the longest). */
static bool build_index(llmr_chat_guard *g)
{
    drop_index(g);
    for (size_t i = 0; i < g->n; i++)
        g->by_byte_n[(unsigned char)g->v[i].text[0]]++;
    for (size_t b = 0; b < 256; b++) {
        if (!g->by_byte_n[b])
            continue;
        if (!(g->by_byte[b] = malloc(g->by_byte_n[b] * sizeof(size_t))))
            return false;
        g->by_byte_n[b] = 0;
    }
    for (size_t i = 0; i < g->n; i++) {
        unsigned char b = (unsigned char)g->v[i].text[0];
        size_t *list = g->by_byte[b], k = g->by_byte_n[b]++;
        while (k > 0 && g->v[list[k - 1]].len < g->v[i].len) {
            list[k] = list[k - 1];
            k--;
        }
        list[k] = i;
    }
    return build_parts(g);
}

static bool guard_add(llmr_chat_guard *g, const char *text, size_t len)
{
    if (!len)
        return true;
    if (g->n == g->cap) {
        size_t cap = g->cap ? g->cap * 2 : 32;
        guard_token *v = realloc(g->v, cap * sizeof *v);
        if (!v)
            return false;
        g->v = v;
        g->cap = cap;
    }
    char *copy = malloc(len);
    if (!copy)
        return false;
    memcpy(copy, text, len);
    g->v[g->n++] = (guard_token){copy, len};
    return true;
}

llmr_chat_guard *llmr_chat_guard_from_json(const json_t *tokens)
{
    if (!json_is_array(tokens))
        return NULL;
    llmr_chat_guard *g = calloc(1, sizeof *g);
    size_t i;
    json_t *t;
    json_array_foreach(tokens, i, t) {
        if (!g || !json_is_string(t) || !guard_add(g, json_string_value(t), json_string_length(t))) {
            llmr_chat_guard_free(g);
            return NULL;
        }
    }
    if (g && !build_index(g)) {
        llmr_chat_guard_free(g);
        return NULL;
    }
    return g;
}

/* ---- guarding the request's strings ------------------------------------------------------ */

typedef struct original {
    const char *s; /* into the request's JSON, which outlives the render */
    size_t n;
} original;

typedef struct guard_run {
    const llmr_chat_guard *g;
    original *v;
    size_t n, cap;
    bool failed;
} guard_run;

/* The longest start of s (shorter than the token) that ends a token. */
static size_t lead_partial(const llmr_chat_guard *g, const char *s, size_t n)
{
    size_t best = 0;
    unsigned char b = n ? (unsigned char)s[0] : 0;
    for (size_t i = 0; n && i < g->ends_n[b]; i++) {
        const guard_part *p = &g->ends[b][i];
        const guard_token *t = &g->v[p->tok];
        if (p->k > best && p->k <= n && memcmp(s, t->text + t->len - p->k, p->k) == 0)
            best = p->k;
    }
    return best;
}

/* The longest end of s (shorter than the token) that starts a token. */
static size_t trail_partial(const llmr_chat_guard *g, const char *s, size_t n)
{
    size_t best = 0;
    unsigned char b = n ? (unsigned char)s[n - 1] : 0;
    for (size_t i = 0; n && i < g->starts_n[b]; i++) {
        const guard_part *p = &g->starts[b][i];
        if (p->k > best && p->k <= n && memcmp(s + n - p->k, g->v[p->tok].text, p->k) == 0)
            best = p->k;
    }
    return best;
}

/* The length of a token occurring at s (the longest), or 0. */
static size_t token_at(const llmr_chat_guard *g, const char *s, size_t n)
{
    unsigned char b = (unsigned char)s[0];
    for (size_t k = 0; k < g->by_byte_n[b]; k++) {
        const guard_token *t = &g->v[g->by_byte[b][k]];
        if (t->len <= n && memcmp(s, t->text, t->len) == 0)
            return t->len;
    }
    return 0;
}

/* The ranges of s to guard, in order and apart. */
static void guarded_ranges(const llmr_chat_guard *g, const char *s, size_t n, llmr_text_spans *r)
{
    llmr_text_spans_push(r, 0, lead_partial(g, s, n));
    for (size_t i = 0; i < n;) {
        size_t len = token_at(g, s + i, n - i);
        if (!len && n - i >= MARK_LEN && memcmp(s + i, MARK, MARK_LEN) == 0)
            len = MARK_LEN;
        llmr_text_spans_push(r, i, len);
        i += len ? len : 1;
    }
    size_t k = trail_partial(g, s, n);
    if (k) { /* it may cover ranges before it: they become part of it */
        size_t from = n - k;
        while (r->n && r->v[r->n - 1].off >= from)
            r->n--;
        llmr_text_spans_push(r, from, k);
    }
}

/* s with its guarded ranges as placeholders (a new string), or NULL when it has none
 * (or on failure: run->failed). */
static json_t *guard_string(guard_run *run, const char *s, size_t n)
{
    llmr_text_spans r = LLMR_TEXT_SPANS_INIT;
    guarded_ranges(run->g, s, n, &r);
    if (r.failed)
        run->failed = true;
    if (r.n == 0 || r.failed) {
        llmr_text_spans_free(&r);
        return NULL;
    }
    llmr_strbuf sb = LLMR_STRBUF_INIT;
    size_t at = 0;
    for (size_t i = 0; i < r.n; i++) {
        if (run->n == run->cap) {
            size_t cap = run->cap ? run->cap * 2 : 16;
            original *v = realloc(run->v, cap * sizeof *v);
            if (!v) {
                run->failed = true;
                break;
            }
            run->v = v;
            run->cap = cap;
        }
        run->v[run->n] = (original){s + r.v[i].off, r.v[i].len};
        llmr_strbuf_append(&sb, s + at, r.v[i].off - at);
        llmr_strbuf_printf(&sb, MARK "%zu" MARK, run->n++);
        at = r.v[i].off + r.v[i].len;
    }
    llmr_strbuf_append(&sb, s + at, n - at);
    json_t *out = run->failed || llmr_strbuf_failed(&sb) ? NULL : json_stringn(sb.data, sb.len);
    if (!out)
        run->failed = true;
    llmr_strbuf_free(&sb);
    llmr_text_spans_free(&r);
    return out;
}

/* A copy of j with every string and key guarded (a new reference; NULL on failure). */
static json_t *guard_json(guard_run *run, const json_t *j)
{
    if (json_is_string(j)) {
        json_t *s = guard_string(run, json_string_value(j), json_string_length(j));
        return s ? s : run->failed ? NULL : json_incref((json_t *)j);
    }
    json_t *out = NULL;
    if (json_is_array(j)) {
        out = json_array();
        size_t i;
        json_t *v;
        json_array_foreach(j, i, v) {
            if (!out || json_array_append_new(out, guard_json(run, v)) != 0)
                run->failed = true;
            if (run->failed)
                break;
        }
    } else if (json_is_object(j)) {
        out = json_object();
        const char *k;
        json_t *v;
        json_object_foreach((json_t *)j, k, v) {
            json_t *gk = guard_string(run, k, strlen(k));
            const char *key = gk ? json_string_value(gk) : k;
            if (run->failed || !out || json_object_set_new(out, key, guard_json(run, v)) != 0)
                run->failed = true;
            json_decref(gk);
            if (run->failed)
                break;
        }
    } else {
        return json_incref((json_t *)j);
    }
    if (run->failed) {
        json_decref(out);
        return NULL;
    }
    return out;
}

/* Appends the render with its placeholders put back, recording their ranges. */
static void restore(const guard_run *run, const char *s, size_t n, llmr_strbuf *out, llmr_text_spans *spans)
{
    size_t at = 0;
    for (;;) {
        const char *m = memmem(s + at, n - at, MARK, MARK_LEN);
        if (!m)
            break;
        size_t i = (size_t)(m - s) + MARK_LEN, idx = 0, digits = 0;
        while (i < n && s[i] >= '0' && s[i] <= '9' && digits < 19) {
            idx = idx * 10 + (size_t)(s[i++] - '0');
            digits++;
        }
        if (!digits || idx >= run->n || n - i < MARK_LEN || memcmp(s + i, MARK, MARK_LEN) != 0) {
            size_t skip = (size_t)(m - s) + MARK_LEN; /* not ours: kept as it is */
            llmr_strbuf_append(out, s + at, skip - at);
            at = skip;
            continue;
        }
        llmr_strbuf_append(out, s + at, (size_t)(m - s) - at);
        llmr_text_spans_push(spans, out->len, run->v[idx].n);
        llmr_strbuf_append(out, run->v[idx].s, run->v[idx].n);
        at = i + MARK_LEN;
    }
    llmr_strbuf_append(out, s + at, n - at);
}

bool llmr_chat_render_text(const llmr_template *tpl, const json_t *special, const json_t *messages,
                           const json_t *tools, const json_t *kwargs, const llmr_chat_guard *g,
                           llmr_strbuf *out, llmr_text_spans *spans, llmr_strbuf *err)
{
    if (!g || g->n == 0)
        return llmr_chat_render(tpl, special, messages, tools, kwargs, out, err);
    guard_run run = {g, NULL, 0, 0, false};
    json_t *m = guard_json(&run, messages);
    json_t *t = tools && !run.failed ? guard_json(&run, tools) : NULL;
    json_t *k = kwargs && !run.failed ? guard_json(&run, kwargs) : NULL;
    bool ok = false;
    if (run.failed) {
        llmr_strbuf_puts(err, "out of memory");
    } else if (run.n == 0) { /* nothing to guard: the render as it is */
        ok = llmr_chat_render(tpl, special, messages, tools, kwargs, out, err);
    } else {
        llmr_strbuf raw = LLMR_STRBUF_INIT;
        ok = llmr_chat_render(tpl, special, m, t, k, &raw, err);
        if (ok) {
            size_t before = out->len;
            restore(&run, raw.data ? raw.data : "", raw.len, out, spans);
            if (llmr_strbuf_failed(out) || spans->failed) {
                out->len = before;
                llmr_strbuf_puts(err, "out of memory");
                ok = false;
            }
        }
        llmr_strbuf_free(&raw);
    }
    json_decref(m);
    json_decref(t);
    json_decref(k);
    free(run.v);
    return ok;
}
