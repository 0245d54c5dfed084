/* Pre-tokenizers: see pretokenizer.h.  Every step turns each text piece into a list
 * of (start, end, is_match) spans covering it, then keeps, drops or merges them by
 * the split behaviour, as tokenizers' NormalizedString::split does, and drops empty
 * pieces. */
#include "tokenizer/pretokenizer.h"

#include <stdlib.h>
#include <string.h>

#include "tokenizer/o200k_split.h"
#include "tokenizer/regex.h"
#include "tokenizer/unicode.h"

/* The GPT-2 pre-tokenizer regex ByteLevel uses when use_regex is true. */
static const char GPT2_PATTERN[] =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

typedef enum kind {
    SPLIT, BYTE_LEVEL, METASPACE, DIGITS, WHITESPACE, WHITESPACE_SPLIT, PUNCTUATION, BERT, SEQUENCE
} kind;

typedef enum behavior { REMOVED, ISOLATED, MERGED_WITH_PREVIOUS, MERGED_WITH_NEXT, CONTIGUOUS } behavior;

typedef enum prepend { PREPEND_ALWAYS, PREPEND_FIRST, PREPEND_NEVER } prepend;

struct llmr_pretokenizer {
    kind kind;
    llmr_regex *regex;          /* Split; ByteLevel with use_regex */
    behavior behavior;          /* Split, Punctuation */
    bool invert;                /* Split */
    bool o200k;                 /* Split with the o200k pattern: ASCII fast path */
    bool add_prefix_space;      /* ByteLevel */
    char replacement[4];        /* Metaspace */
    size_t replacement_len;
    uint32_t replacement_cp;
    prepend prepend;            /* Metaspace */
    bool split;                 /* Metaspace */
    bool individual_digits;     /* Digits */
    llmr_pretokenizer **steps;  /* Sequence */
    size_t n_steps;
};

void llmr_pretokenizer_free(llmr_pretokenizer *p)
{
    if (!p)
        return;
    for (size_t i = 0; i < p->n_steps; i++)
        llmr_pretokenizer_free(p->steps[i]);
    free(p->steps);
    llmr_regex_free(p->regex);
    free(p);
}

llmr_regex *llmr_pattern_build(const json_t *pattern, const char *owner, llmr_strbuf *err);

static bool parse_behavior(const json_t *v, behavior def, behavior *out)
{
    const char *s = json_string_value(v);
    if (!v) {
        *out = def;
        return true;
    }
    static const char *const names[] = {"Removed", "Isolated", "MergedWithPrevious",
                                        "MergedWithNext", "Contiguous"};
    for (int i = 0; s && i < 5; i++) {
        if (strcmp(s, names[i]) == 0) {
            *out = (behavior)i;
            return true;
        }
    }
    return false;
}

static llmr_status build_metaspace(const json_t *spec, llmr_pretokenizer *p, llmr_strbuf *err)
{
    const char *rep = json_string_value(json_object_get(spec, "replacement"));
    size_t len = rep ? strlen(rep) : 0;
    size_t k = 0;
    if (len)
        p->replacement_cp = llmr_uc_decode(rep, len, &k);
    if (!rep || k != len || len > 4) {
        llmr_strbuf_puts(err, "pre_tokenizer Metaspace: \"replacement\" must be one character");
        return LLMR_MODEL_CORRUPT;
    }
    memcpy(p->replacement, rep, len);
    p->replacement_len = len;
    /* "prepend_scheme" (current) or the older "add_prefix_space". */
    const char *scheme = json_string_value(json_object_get(spec, "prepend_scheme"));
    const json_t *aps = json_object_get(spec, "add_prefix_space");
    if (scheme && strcmp(scheme, "always") == 0)
        p->prepend = PREPEND_ALWAYS;
    else if (scheme && strcmp(scheme, "first") == 0)
        p->prepend = PREPEND_FIRST;
    else if (scheme && strcmp(scheme, "never") == 0)
        p->prepend = PREPEND_NEVER;
    else if (scheme) {
        llmr_strbuf_printf(err, "pre_tokenizer Metaspace: unknown prepend_scheme \"%s\"", scheme);
        return LLMR_MODEL_CORRUPT;
    } else
        p->prepend = !aps || json_is_true(aps) ? PREPEND_ALWAYS : PREPEND_NEVER;
    const json_t *split = json_object_get(spec, "split");
    p->split = !split || json_is_true(split);
    return LLMR_OK;
}

llmr_status llmr_pretokenizer_build(const json_t *spec, llmr_pretokenizer **out, bool *byte_level,
                                    llmr_strbuf *err)
{
    *out = NULL;
    *byte_level = false;
    if (!spec || json_is_null(spec))
        return LLMR_OK;
    const char *type = json_string_value(json_object_get(spec, "type"));
    if (!type) {
        llmr_strbuf_puts(err, "pre_tokenizer has no \"type\"");
        return LLMR_MODEL_CORRUPT;
    }
    llmr_pretokenizer *p = calloc(1, sizeof *p);
    if (!p) {
        llmr_strbuf_puts(err, "out of memory");
        return LLMR_OOM_RAM;
    }
    llmr_status st = LLMR_OK;
    if (strcmp(type, "Split") == 0) {
        p->kind = SPLIT;
        p->invert = json_is_true(json_object_get(spec, "invert"));
        if (!parse_behavior(json_object_get(spec, "behavior"), REMOVED, &p->behavior)) {
            llmr_strbuf_puts(err, "pre_tokenizer Split: unknown \"behavior\"");
            st = LLMR_MODEL_CORRUPT;
        } else if (!(p->regex = llmr_pattern_build(json_object_get(spec, "pattern"),
                                                   "pre_tokenizer Split", err))) {
            st = LLMR_MODEL_CORRUPT;
        } else {
            const char *re = json_string_value(json_object_get(json_object_get(spec, "pattern"), "Regex"));
            p->o200k = re && strcmp(re, llmr_o200k_pattern) == 0;
        }
    } else if (strcmp(type, "ByteLevel") == 0) {
        p->kind = BYTE_LEVEL;
        const json_t *aps = json_object_get(spec, "add_prefix_space");
        const json_t *use_regex = json_object_get(spec, "use_regex");
        p->add_prefix_space = !aps || json_is_true(aps);
        if ((!use_regex || json_is_true(use_regex)) &&
            !(p->regex = llmr_regex_compile(GPT2_PATTERN, strlen(GPT2_PATTERN), false, err)))
            st = LLMR_INTERNAL;
        *byte_level = true;
    } else if (strcmp(type, "Metaspace") == 0) {
        p->kind = METASPACE;
        st = build_metaspace(spec, p, err);
    } else if (strcmp(type, "Digits") == 0) {
        p->kind = DIGITS;
        p->individual_digits = json_is_true(json_object_get(spec, "individual_digits"));
    } else if (strcmp(type, "Whitespace") == 0) {
        p->kind = WHITESPACE;
    } else if (strcmp(type, "WhitespaceSplit") == 0) {
        p->kind = WHITESPACE_SPLIT;
    } else if (strcmp(type, "Punctuation") == 0) {
        p->kind = PUNCTUATION;
        if (!parse_behavior(json_object_get(spec, "behavior"), ISOLATED, &p->behavior)) {
            llmr_strbuf_puts(err, "pre_tokenizer Punctuation: unknown \"behavior\"");
            st = LLMR_MODEL_CORRUPT;
        }
    } else if (strcmp(type, "BertPreTokenizer") == 0) {
        p->kind = BERT;
    } else if (strcmp(type, "Sequence") == 0) {
        const json_t *list = json_object_get(spec, "pretokenizers");
        p->kind = SEQUENCE;
        if (!json_is_array(list)) {
            llmr_strbuf_puts(err, "pre_tokenizer Sequence: \"pretokenizers\" must be an array");
            st = LLMR_MODEL_CORRUPT;
        } else if (json_array_size(list) &&
                   !(p->steps = calloc(json_array_size(list), sizeof *p->steps))) {
            st = LLMR_OOM_RAM;
        }
        for (size_t i = 0; st == LLMR_OK && i < json_array_size(list); i++) {
            if (*byte_level) {
                llmr_strbuf_puts(err, "pre_tokenizer Sequence: steps after ByteLevel are not "
                                      "supported (ByteLevel must come last)");
                st = LLMR_UNSUPPORTED;
                break;
            }
            bool bl = false;
            st = llmr_pretokenizer_build(json_array_get(list, i), &p->steps[p->n_steps], &bl, err);
            if (p->steps[p->n_steps])
                p->n_steps++;
            *byte_level = bl;
        }
    } else {
        llmr_strbuf_printf(err, "pre_tokenizer type \"%s\" is not supported (supported: Split, "
                                "ByteLevel, Metaspace, Digits, Whitespace, WhitespaceSplit, "
                                "Punctuation, BertPreTokenizer, Sequence)",
                           type);
        st = LLMR_UNSUPPORTED;
    }
    if (st == LLMR_OOM_RAM && err->len == 0)
        llmr_strbuf_puts(err, "out of memory");
    if (st != LLMR_OK) {
        llmr_pretokenizer_free(p);
        return st;
    }
    *out = p;
    return LLMR_OK;
}

/* --- spans --------------------------------------------------------------- */

typedef struct span {
    size_t s, e;
    bool match; /* after the behaviour is applied: "remove" */
} span;

typedef struct spans {
    span *v;
    size_t n, cap;
    bool failed;
} spans;

static void span_push(spans *m, size_t s, size_t e, bool match)
{
    if (m->n == m->cap) {
        size_t cap = m->cap ? m->cap * 2 : 32;
        span *v = realloc(m->v, cap * sizeof *v);
        if (!v) {
            m->failed = true;
            return;
        }
        m->v = v;
        m->cap = cap;
    }
    m->v[m->n++] = (span){s, e, match};
}

/* Regex matches over text, as tokenizers' Pattern for an Oniguruma regex.  With o200k
 * set (the pattern is exactly the o200k split regex) the ASCII fast path answers where
 * it can and the regex engine everywhere else. */
static bool regex_spans(const llmr_regex *re, bool o200k, const char *text, size_t len,
                        spans *m, llmr_strbuf *err)
{
    size_t pos = 0, prev = 0;
    while (pos <= len) {
        size_t s = pos, e;
        if (!(o200k && pos < len && llmr_o200k_match_ascii(text, len, pos, &e))) {
            int r = llmr_regex_find(re, text, len, pos, &s, &e, err);
            if (r < 0)
                return false;
            if (r == 0)
                break;
        }
        if (prev != s)
            span_push(m, prev, s, false);
        span_push(m, s, e, true);
        prev = e;
        if (e == s) {
            if (e >= len)
                break;
            size_t k;
            llmr_uc_decode(text + e, len - e, &k);
            pos = e + k;
        } else {
            pos = e;
        }
    }
    if (prev != len)
        span_push(m, prev, len, false);
    return true;
}

typedef bool (*char_class)(uint32_t cp, const llmr_pretokenizer *p);

/* Each character of the class is a match of its own (tokenizers' Pattern for a
 * char predicate). */
static void char_spans(char_class is, const llmr_pretokenizer *p, const char *text, size_t len,
                       spans *m)
{
    size_t last = 0, i = 0;
    while (i < len) {
        size_t k;
        uint32_t cp = llmr_uc_decode(text + i, len - i, &k);
        if (is(cp, p)) {
            if (last < i)
                span_push(m, last, i, false);
            span_push(m, i, i + k, true);
            last = i + k;
        }
        i += k;
    }
    if (last < len)
        span_push(m, last, len, false);
}

static void invert(spans *m)
{
    for (size_t i = 0; i < m->n; i++)
        m->v[i].match = !m->v[i].match;
}

/* Applies the behaviour; afterwards span.match means "remove". */
static void apply_behavior(spans *m, behavior b)
{
    size_t n = 0;
    bool prev = false;
    switch (b) {
    case REMOVED:
        return;
    case ISOLATED:
        for (size_t i = 0; i < m->n; i++)
            m->v[i].match = false;
        return;
    case CONTIGUOUS:
        for (size_t i = 0; i < m->n; i++) {
            bool is_match = m->v[i].match;
            if (n > 0 && is_match == prev)
                m->v[n - 1].e = m->v[i].e;
            else
                m->v[n++] = (span){m->v[i].s, m->v[i].e, false};
            prev = is_match;
        }
        break;
    case MERGED_WITH_PREVIOUS:
        for (size_t i = 0; i < m->n; i++) {
            bool is_match = m->v[i].match;
            if (n > 0 && is_match && !prev)
                m->v[n - 1].e = m->v[i].e;
            else
                m->v[n++] = (span){m->v[i].s, m->v[i].e, false};
            prev = is_match;
        }
        break;
    case MERGED_WITH_NEXT:
        /* Right to left, writing from the end of the array, then moved to the front. */
        for (size_t i = m->n; i-- > 0;) {
            bool is_match = m->v[i].match;
            size_t top = m->n - n; /* index of the last written (leftmost) span */
            if (n > 0 && is_match && !prev)
                m->v[top].s = m->v[i].s;
            else {
                m->v[m->n - 1 - n] = (span){m->v[i].s, m->v[i].e, false};
                n++;
            }
            prev = is_match;
        }
        memmove(m->v, m->v + (m->n - n), n * sizeof *m->v);
        break;
    }
    m->n = n;
}

/* Emits the kept, non-empty spans of `src` as pieces. */
static void emit(llmr_pieces *out, const llmr_piece *src, const spans *m)
{
    for (size_t i = 0; i < m->n; i++) {
        const span *s = &m->v[i];
        if (s->match || s->e == s->s)
            continue;
        llmr_pieces_push(out, (llmr_piece){src->off + s->s, s->e - s->s, -1, src->first && s->s == 0, src->plain});
    }
}

static bool is_numeric_cls(uint32_t cp, const llmr_pretokenizer *p)
{
    (void)p;
    return llmr_uc_is_numeric(cp);
}

static bool is_whitespace_cls(uint32_t cp, const llmr_pretokenizer *p)
{
    (void)p;
    return llmr_uc_is_whitespace(cp);
}

static bool is_punct_cls(uint32_t cp, const llmr_pretokenizer *p)
{
    (void)p;
    return llmr_uc_is_punctuation(cp);
}

static bool is_replacement_cls(uint32_t cp, const llmr_pretokenizer *p)
{
    return cp == p->replacement_cp;
}

/* Whitespace: keeps runs of \w and runs of [^\w\s], drops whitespace. */
static void whitespace_split_words(llmr_pieces *out, const llmr_piece *src, const char *text)
{
    size_t i = 0, len = src->len;
    int run = 0; /* 0 none, 1 word, 2 other */
    size_t start = 0;
    while (i <= len) {
        int cls = 0;
        size_t k = 1;
        if (i < len) {
            uint32_t cp = llmr_uc_decode(text + i, len - i, &k);
            cls = llmr_uc_is_word(cp) ? 1 : llmr_uc_is_whitespace(cp) ? 0 : 2;
        }
        if (cls != run) {
            if (run)
                llmr_pieces_push(out, (llmr_piece){src->off + start, i - start, -1,
                                                   src->first && start == 0, src->plain});
            run = cls;
            start = i;
        }
        if (i == len)
            break;
        i += k;
    }
}

/* --- steps ---------------------------------------------------------------- */

static bool apply_step(const llmr_pretokenizer *p, const llmr_piece *piece, llmr_pieces *out,
                       spans *m, llmr_strbuf *err)
{
    llmr_piece src = *piece;
    m->n = 0;
    if (src.len == 0)
        return true; /* empty text yields no pieces (and gets no prefix) */
    if (p->kind == METASPACE || (p->kind == BYTE_LEVEL && p->add_prefix_space)) {
        /* These rewrite the text: build the new text at the end of the arena. */
        llmr_strbuf *a = out->arena;
        size_t off = a->len;
        const char *text = a->data + src.off; /* valid until the first append below */
        if (p->kind == BYTE_LEVEL) {
            if (text[0] != ' ') {
                llmr_strbuf_putc(a, ' ');
                llmr_strbuf_append_range(a, src.off, src.len);
                src.off = off;
                src.len += 1;
            }
        } else {
            bool starts = src.len >= p->replacement_len &&
                          memcmp(text, p->replacement, p->replacement_len) == 0;
            /* Spaces become the replacement; a leading space counts as starting with it. */
            starts = starts || text[0] == ' ';
            if ((p->prepend == PREPEND_ALWAYS || (p->prepend == PREPEND_FIRST && src.first)) &&
                !starts)
                llmr_strbuf_append(a, p->replacement, p->replacement_len);
            for (size_t i = 0; i < src.len; i++) {
                char c = a->data[src.off + i];
                if (c == ' ')
                    llmr_strbuf_append(a, p->replacement, p->replacement_len);
                else
                    llmr_strbuf_putc(a, c);
            }
            src.off = off;
            src.len = a->len - off;
        }
        if (llmr_strbuf_failed(a)) {
            llmr_strbuf_puts(err, "out of memory");
            return false;
        }
    }
    const char *text = out->arena->data + src.off;
    switch (p->kind) {
    case SPLIT:
        if (!regex_spans(p->regex, p->o200k, text, src.len, m, err))
            return false;
        if (p->invert)
            invert(m);
        apply_behavior(m, p->behavior);
        break;
    case BYTE_LEVEL:
        if (!p->regex) {
            llmr_pieces_push(out, src);
            return true;
        }
        if (!regex_spans(p->regex, false, text, src.len, m, err))
            return false;
        apply_behavior(m, ISOLATED);
        break;
    case METASPACE:
        if (!p->split) {
            llmr_pieces_push(out, src);
            return true;
        }
        char_spans(is_replacement_cls, p, text, src.len, m);
        apply_behavior(m, MERGED_WITH_NEXT);
        break;
    case DIGITS:
        char_spans(is_numeric_cls, p, text, src.len, m);
        apply_behavior(m, p->individual_digits ? ISOLATED : CONTIGUOUS);
        break;
    case WHITESPACE:
        whitespace_split_words(out, &src, text);
        return true;
    case WHITESPACE_SPLIT:
        char_spans(is_whitespace_cls, p, text, src.len, m);
        apply_behavior(m, REMOVED);
        break;
    case PUNCTUATION:
        char_spans(is_punct_cls, p, text, src.len, m);
        apply_behavior(m, p->behavior);
        break;
    case BERT: {
        /* Whitespace removed, then punctuation isolated within each word. */
        char_spans(is_whitespace_cls, p, text, src.len, m);
        spans words = *m;
        *m = (spans){0};
        for (size_t i = 0; i < words.n; i++) {
            if (words.v[i].match || words.v[i].e == words.v[i].s)
                continue;
            llmr_piece w = {src.off + words.v[i].s, words.v[i].e - words.v[i].s, -1,
                            src.first && words.v[i].s == 0, src.plain};
            m->n = 0;
            char_spans(is_punct_cls, p, out->arena->data + w.off, w.len, m);
            apply_behavior(m, ISOLATED);
            emit(out, &w, m);
        }
        bool failed = words.failed || m->failed;
        free(words.v);
        if (failed)
            llmr_strbuf_puts(err, "out of memory");
        return !failed;
    }
    case SEQUENCE:
        break; /* handled by the caller */
    }
    if (m->failed) {
        llmr_strbuf_puts(err, "out of memory");
        return false;
    }
    emit(out, &src, m);
    return true;
}

static bool apply_one(const llmr_pretokenizer *p, llmr_pieces *in, llmr_pieces *out,
                      llmr_strbuf *err)
{
    out->n = 0;
    out->failed = false;
    spans m = {0};
    bool ok = true;
    for (size_t i = 0; ok && i < in->n; i++) {
        if (in->v[i].id >= 0)
            llmr_pieces_push(out, in->v[i]);
        else
            ok = apply_step(p, &in->v[i], out, &m, err);
    }
    free(m.v);
    if (ok && out->failed) {
        llmr_strbuf_puts(err, "out of memory");
        ok = false;
    }
    /* The result goes back into *in. */
    llmr_pieces swap = *in;
    *in = *out;
    *out = swap;
    return ok;
}

bool llmr_pretokenizer_apply(const llmr_pretokenizer *p, llmr_pieces *pieces,
                             llmr_pieces *scratch, llmr_strbuf *err)
{
    if (p->kind != SEQUENCE)
        return apply_one(p, pieces, scratch, err);
    for (size_t i = 0; i < p->n_steps; i++)
        if (!llmr_pretokenizer_apply(p->steps[i], pieces, scratch, err))
            return false;
    return true;
}
