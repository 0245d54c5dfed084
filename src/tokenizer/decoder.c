/* Decoders: see decoder.h.  Each step maps a token list to a new one, as
 * tokenizers' decode_chain; the text is the concatenation of the last list. */
#include "tokenizer/decoder.h"

#include <stdlib.h>
#include <string.h>

#include "common/utf8.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/regex.h"
#include "tokenizer/unicode.h"

typedef enum kind { BYTE_LEVEL, METASPACE, BYTE_FALLBACK, FUSE, STRIP, REPLACE, SEQUENCE } kind;

struct llmr_decoder {
    kind kind;
    uint32_t ch;          /* Metaspace: replacement; Strip: content */
    bool prefix;          /* Metaspace: the first token's replacement is dropped */
    size_t start, stop;   /* Strip */
    llmr_regex *pattern;  /* Replace */
    char *content;        /* Replace */
    size_t content_len;
    llmr_decoder **steps; /* Sequence */
    size_t n_steps;
};

void llmr_token_list_init(llmr_token_list *l)
{
    memset(l, 0, sizeof *l);
}

void llmr_token_list_free(llmr_token_list *l)
{
    llmr_strbuf_free(&l->arena);
    free(l->v);
    memset(l, 0, sizeof *l);
}

void llmr_token_list_clear(llmr_token_list *l)
{
    llmr_strbuf_reset(&l->arena);
    l->n = 0;
    l->failed = false;
}

void llmr_token_list_add(llmr_token_list *l, const char *s, size_t len)
{
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 16;
        struct llmr_token_span *v = realloc(l->v, cap * sizeof *v);
        if (!v) {
            l->failed = true;
            return;
        }
        l->v = v;
        l->cap = cap;
    }
    size_t off = l->arena.len;
    if (!llmr_strbuf_append(&l->arena, s, len))
        l->failed = true;
    l->v[l->n++] = (struct llmr_token_span){off, len};
}

/* Starts a token made of several appends: add it empty, then extend the last. */
static void extend_last(llmr_token_list *l, const char *s, size_t len)
{
    if (!llmr_strbuf_append(&l->arena, s, len))
        l->failed = true;
    l->v[l->n - 1].len += len;
}

static const char *tok(const llmr_token_list *l, size_t i)
{
    return l->arena.data ? l->arena.data + l->v[i].off : "";
}

void llmr_decoder_free(llmr_decoder *d)
{
    if (!d)
        return;
    for (size_t i = 0; i < d->n_steps; i++)
        llmr_decoder_free(d->steps[i]);
    free(d->steps);
    llmr_regex_free(d->pattern);
    free(d->content);
    free(d);
}

llmr_regex *llmr_pattern_build(const json_t *pattern, const char *owner, llmr_strbuf *err);

static bool one_char(const json_t *v, uint32_t *cp)
{
    const char *s = json_string_value(v);
    size_t n = s ? strlen(s) : 0, k = 0;
    if (n)
        *cp = llmr_uc_decode(s, n, &k);
    return n && k == n;
}

llmr_status llmr_decoder_build(const json_t *spec, llmr_decoder **out, llmr_strbuf *err)
{
    *out = NULL;
    if (!spec || json_is_null(spec))
        return LLMR_OK;
    const char *type = json_string_value(json_object_get(spec, "type"));
    if (!type) {
        llmr_strbuf_puts(err, "decoder has no \"type\"");
        return LLMR_MODEL_CORRUPT;
    }
    llmr_decoder *d = calloc(1, sizeof *d);
    if (!d) {
        llmr_strbuf_puts(err, "out of memory");
        return LLMR_OOM_RAM;
    }
    llmr_status st = LLMR_OK;
    if (strcmp(type, "ByteLevel") == 0) {
        d->kind = BYTE_LEVEL;
    } else if (strcmp(type, "Metaspace") == 0) {
        d->kind = METASPACE;
        const char *scheme = json_string_value(json_object_get(spec, "prepend_scheme"));
        const json_t *aps = json_object_get(spec, "add_prefix_space");
        d->prefix = scheme ? strcmp(scheme, "never") != 0 : (!aps || json_is_true(aps));
        if (!one_char(json_object_get(spec, "replacement"), &d->ch)) {
            llmr_strbuf_puts(err, "decoder Metaspace: \"replacement\" must be one character");
            st = LLMR_MODEL_CORRUPT;
        }
    } else if (strcmp(type, "ByteFallback") == 0) {
        d->kind = BYTE_FALLBACK;
    } else if (strcmp(type, "Fuse") == 0) {
        d->kind = FUSE;
    } else if (strcmp(type, "Strip") == 0) {
        d->kind = STRIP;
        json_int_t start = json_integer_value(json_object_get(spec, "start"));
        json_int_t stop = json_integer_value(json_object_get(spec, "stop"));
        d->start = start > 0 ? (size_t)start : 0;
        d->stop = stop > 0 ? (size_t)stop : 0;
        if (!one_char(json_object_get(spec, "content"), &d->ch)) {
            llmr_strbuf_puts(err, "decoder Strip: \"content\" must be one character");
            st = LLMR_MODEL_CORRUPT;
        }
    } else if (strcmp(type, "Replace") == 0) {
        d->kind = REPLACE;
        const json_t *c = json_object_get(spec, "content");
        if (!json_is_string(c)) {
            llmr_strbuf_puts(err, "decoder Replace: \"content\" must be a string");
            st = LLMR_MODEL_CORRUPT;
        } else {
            d->content_len = json_string_length(c);
            d->content = malloc(d->content_len + 1);
            if (!d->content)
                st = LLMR_OOM_RAM;
            else
                memcpy(d->content, json_string_value(c), d->content_len + 1);
            if (st == LLMR_OK && !(d->pattern = llmr_pattern_build(json_object_get(spec, "pattern"),
                                                                   "decoder Replace", err)))
                st = LLMR_MODEL_CORRUPT;
        }
    } else if (strcmp(type, "Sequence") == 0) {
        const json_t *list = json_object_get(spec, "decoders");
        d->kind = SEQUENCE;
        if (!json_is_array(list)) {
            llmr_strbuf_puts(err, "decoder Sequence: \"decoders\" must be an array");
            st = LLMR_MODEL_CORRUPT;
        } else if (json_array_size(list) &&
                   !(d->steps = calloc(json_array_size(list), sizeof *d->steps))) {
            st = LLMR_OOM_RAM;
        }
        for (size_t i = 0; st == LLMR_OK && i < json_array_size(list); i++) {
            st = llmr_decoder_build(json_array_get(list, i), &d->steps[d->n_steps], err);
            if (d->steps[d->n_steps])
                d->n_steps++;
        }
    } else {
        llmr_strbuf_printf(err, "decoder type \"%s\" is not supported (supported: ByteLevel, "
                                "Metaspace, ByteFallback, Fuse, Strip, Replace, Sequence)",
                           type);
        st = LLMR_UNSUPPORTED;
    }
    if (st == LLMR_OOM_RAM && err->len == 0)
        llmr_strbuf_puts(err, "out of memory");
    if (st != LLMR_OK) {
        llmr_decoder_free(d);
        return st;
    }
    *out = d;
    return LLMR_OK;
}

bool llmr_decoder_has_byte_fallback(const llmr_decoder *d)
{
    if (!d)
        return false;
    if (d->kind == BYTE_FALLBACK)
        return true;
    for (size_t i = 0; d->kind == SEQUENCE && i < d->n_steps; i++)
        if (llmr_decoder_has_byte_fallback(d->steps[i]))
            return true;
    return false;
}

static void byte_level(const llmr_token_list *in, llmr_token_list *out)
{
    llmr_strbuf bytes = LLMR_STRBUF_INIT;
    for (size_t i = 0; i < in->n; i++)
        if (!llmr_byte_level_decode(tok(in, i), in->v[i].len, &bytes))
            llmr_strbuf_append(&bytes, tok(in, i), in->v[i].len); /* not byte-level: as is */
    llmr_token_list_add(out, "", 0);
    llmr_strbuf lossy = LLMR_STRBUF_INIT;
    llmr_strbuf_append_lossy(&lossy, bytes.data ? bytes.data : "", bytes.len);
    extend_last(out, llmr_strbuf_cstr(&lossy), lossy.len);
    if (llmr_strbuf_failed(&bytes) || llmr_strbuf_failed(&lossy))
        out->failed = true;
    llmr_strbuf_free(&bytes);
    llmr_strbuf_free(&lossy);
}

static void metaspace(const llmr_decoder *d, const llmr_token_list *in, llmr_token_list *out)
{
    for (size_t i = 0; i < in->n; i++) {
        const char *t = tok(in, i);
        size_t n = in->v[i].len, j = 0;
        llmr_token_list_add(out, "", 0);
        while (j < n) {
            size_t k;
            uint32_t cp = llmr_uc_decode(t + j, n - j, &k);
            if (cp != d->ch)
                extend_last(out, t + j, k);
            else if (!(i == 0 && d->prefix))
                extend_last(out, " ", 1);
            j += k;
        }
    }
}

static int hexval(char c)
{
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10
                                            : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                                                   : -1;
}

static void flush_bytes(llmr_token_list *out, llmr_strbuf *bytes)
{
    if (bytes->len == 0)
        return;
    if (llmr_utf8_valid(bytes->data, bytes->len, NULL))
        llmr_token_list_add(out, bytes->data, bytes->len);
    else
        for (size_t i = 0; i < bytes->len; i++)
            llmr_token_list_add(out, "\xef\xbf\xbd", 3);
    llmr_strbuf_reset(bytes);
}

static void byte_fallback(const llmr_token_list *in, llmr_token_list *out)
{
    llmr_strbuf bytes = LLMR_STRBUF_INIT;
    for (size_t i = 0; i < in->n; i++) {
        const char *t = tok(in, i);
        if (in->v[i].len == 6 && memcmp(t, "<0x", 3) == 0 && t[5] == '>' && hexval(t[3]) >= 0 &&
            hexval(t[4]) >= 0) {
            llmr_strbuf_putc(&bytes, (char)(hexval(t[3]) * 16 + hexval(t[4])));
            continue;
        }
        flush_bytes(out, &bytes);
        llmr_token_list_add(out, t, in->v[i].len);
    }
    flush_bytes(out, &bytes);
    llmr_strbuf_free(&bytes);
}

static void strip(const llmr_decoder *d, const llmr_token_list *in, llmr_token_list *out)
{
    for (size_t i = 0; i < in->n; i++) {
        const char *t = tok(in, i);
        size_t n = in->v[i].len, b = 0, e = n;
        for (size_t c = 0; c < d->start && b < n; c++) {
            size_t k;
            if (llmr_uc_decode(t + b, n - b, &k) != d->ch)
                break;
            b += k;
        }
        for (size_t c = 0; c < d->stop && e > b; c++) {
            size_t s = e - 1;
            while (s > b && ((unsigned char)t[s] & 0xc0) == 0x80)
                s--;
            size_t k;
            if (llmr_uc_decode(t + s, e - s, &k) != d->ch)
                break;
            e = s;
        }
        llmr_token_list_add(out, t + b, e - b);
    }
}

static bool step(const llmr_decoder *d, llmr_token_list *list, llmr_strbuf *err)
{
    if (d->kind == SEQUENCE) {
        for (size_t i = 0; i < d->n_steps; i++)
            if (!step(d->steps[i], list, err))
                return false;
        return true;
    }
    llmr_token_list out;
    llmr_token_list_init(&out);
    bool ok = true;
    switch (d->kind) {
    case BYTE_LEVEL:
        byte_level(list, &out);
        break;
    case METASPACE:
        metaspace(d, list, &out);
        break;
    case BYTE_FALLBACK:
        byte_fallback(list, &out);
        break;
    case FUSE:
        llmr_token_list_add(&out, "", 0);
        for (size_t i = 0; i < list->n; i++)
            extend_last(&out, tok(list, i), list->v[i].len);
        break;
    case STRIP:
        strip(d, list, &out);
        break;
    case REPLACE:
        for (size_t i = 0; ok && i < list->n; i++) {
            llmr_strbuf t = LLMR_STRBUF_INIT;
            ok = llmr_regex_replace_all(d->pattern, tok(list, i), list->v[i].len, d->content,
                                        d->content_len, &t, err);
            llmr_token_list_add(&out, llmr_strbuf_cstr(&t), t.len);
            llmr_strbuf_free(&t);
        }
        break;
    case SEQUENCE:
        break;
    }
    if (ok && out.failed) {
        llmr_strbuf_puts(err, "out of memory");
        ok = false;
    }
    llmr_token_list_free(list);
    *list = out;
    return ok;
}

bool llmr_decoder_run(const llmr_decoder *d, llmr_token_list *tokens, llmr_strbuf *out,
                      llmr_strbuf *err)
{
    if (!d) {
        for (size_t i = 0; i < tokens->n; i++) {
            if (i)
                llmr_strbuf_putc(out, ' ');
            llmr_strbuf_append(out, tok(tokens, i), tokens->v[i].len);
        }
        return !llmr_strbuf_failed(out);
    }
    if (!step(d, tokens, err))
        return false;
    for (size_t i = 0; i < tokens->n; i++)
        llmr_strbuf_append(out, tok(tokens, i), tokens->v[i].len);
    if (llmr_strbuf_failed(out)) {
        llmr_strbuf_puts(err, "out of memory");
        return false;
    }
    return true;
}
