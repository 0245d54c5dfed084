/* Normalizers: see normalizer.h.  Each step rewrites the whole text; Sequence chains
 * them through two buffers. */
#include "tokenizer/normalizer.h"

#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "tokenizer/regex.h"
#include "tokenizer/unicode.h"

typedef enum kind { NFC, NFD, NFKC, NFKD, LOWERCASE, STRIP, PREPEND, REPLACE, SEQUENCE } kind;

struct llmr_normalizer {
    kind kind;
    bool left, right;       /* Strip */
    char *text;             /* Prepend: the prefix; Replace: the content */
    size_t text_len;
    llmr_regex *pattern;    /* Replace */
    llmr_normalizer **steps; /* Sequence */
    size_t n_steps;
};

void llmr_normalizer_free(llmr_normalizer *n)
{
    if (!n)
        return;
    for (size_t i = 0; i < n->n_steps; i++)
        llmr_normalizer_free(n->steps[i]);
    free(n->steps);
    free(n->text);
    llmr_regex_free(n->pattern);
    free(n);
}

static char *dup_string(const json_t *s, size_t *len)
{
    *len = json_string_length(s);
    char *c = malloc(*len + 1);
    if (c)
        memcpy(c, json_string_value(s), *len + 1);
    return c;
}

/* A Replace/Split pattern: {"String": "..."} or {"Regex": "..."}. */
llmr_regex *llmr_pattern_build(const json_t *pattern, const char *owner, llmr_strbuf *err);

llmr_regex *llmr_pattern_build(const json_t *pattern, const char *owner, llmr_strbuf *err)
{
    const json_t *lit = json_object_get(pattern, "String");
    const json_t *re = json_object_get(pattern, "Regex");
    const json_t *s = json_is_string(lit) ? lit : re;
    if (!json_is_object(pattern) || !json_is_string(s)) {
        llmr_strbuf_printf(err, "%s: pattern must be {\"String\": ...} or {\"Regex\": ...}", owner);
        return NULL;
    }
    llmr_strbuf why = LLMR_STRBUF_INIT;
    llmr_regex *r = llmr_regex_compile(json_string_value(s), json_string_length(s),
                                       json_is_string(lit), &why);
    if (!r)
        llmr_strbuf_printf(err, "%s: pattern does not compile: %s", owner, llmr_strbuf_cstr(&why));
    llmr_strbuf_free(&why);
    return r;
}

llmr_status llmr_normalizer_build(const json_t *spec, llmr_normalizer **out, llmr_strbuf *err)
{
    *out = NULL;
    if (!spec || json_is_null(spec))
        return LLMR_OK;
    const char *type = json_string_value(json_object_get(spec, "type"));
    if (!type) {
        llmr_strbuf_puts(err, "normalizer has no \"type\"");
        return LLMR_MODEL_CORRUPT;
    }
    llmr_normalizer *n = calloc(1, sizeof *n);
    if (!n) {
        llmr_strbuf_puts(err, "out of memory");
        return LLMR_OOM_RAM;
    }
    llmr_status st = LLMR_OK;
    if (strcmp(type, "NFC") == 0) {
        n->kind = NFC;
    } else if (strcmp(type, "NFD") == 0) {
        n->kind = NFD;
    } else if (strcmp(type, "NFKC") == 0) {
        n->kind = NFKC;
    } else if (strcmp(type, "NFKD") == 0) {
        n->kind = NFKD;
    } else if (strcmp(type, "Lowercase") == 0) {
        n->kind = LOWERCASE;
    } else if (strcmp(type, "Strip") == 0) {
        n->kind = STRIP;
        n->left = json_is_true(json_object_get(spec, "strip_left"));
        n->right = json_is_true(json_object_get(spec, "strip_right"));
    } else if (strcmp(type, "Prepend") == 0) {
        const json_t *p = json_object_get(spec, "prepend");
        n->kind = PREPEND;
        if (!json_is_string(p)) {
            llmr_strbuf_puts(err, "normalizer Prepend: \"prepend\" must be a string");
            st = LLMR_MODEL_CORRUPT;
        } else if (!(n->text = dup_string(p, &n->text_len))) {
            st = LLMR_OOM_RAM;
        }
    } else if (strcmp(type, "Replace") == 0) {
        const json_t *c = json_object_get(spec, "content");
        n->kind = REPLACE;
        if (!json_is_string(c)) {
            llmr_strbuf_puts(err, "normalizer Replace: \"content\" must be a string");
            st = LLMR_MODEL_CORRUPT;
        } else if (!(n->text = dup_string(c, &n->text_len)) ||
                   !(n->pattern = llmr_pattern_build(json_object_get(spec, "pattern"),
                                                     "normalizer Replace", err))) {
            st = err->len ? LLMR_MODEL_CORRUPT : LLMR_OOM_RAM;
        }
    } else if (strcmp(type, "Sequence") == 0) {
        const json_t *list = json_object_get(spec, "normalizers");
        n->kind = SEQUENCE;
        if (!json_is_array(list)) {
            llmr_strbuf_puts(err, "normalizer Sequence: \"normalizers\" must be an array");
            st = LLMR_MODEL_CORRUPT;
        } else if (json_array_size(list) &&
                   !(n->steps = calloc(json_array_size(list), sizeof *n->steps))) {
            st = LLMR_OOM_RAM;
        }
        for (size_t i = 0; st == LLMR_OK && i < json_array_size(list); i++) {
            st = llmr_normalizer_build(json_array_get(list, i), &n->steps[n->n_steps], err);
            if (n->steps[n->n_steps])
                n->n_steps++;
        }
    } else {
        llmr_strbuf_printf(err, "normalizer type \"%s\" is not supported (supported: NFC, NFD, "
                                "NFKC, NFKD, Lowercase, Strip, Prepend, Replace, Sequence)",
                           type);
        st = LLMR_UNSUPPORTED;
    }
    if (st == LLMR_OOM_RAM && err->len == 0)
        llmr_strbuf_puts(err, "out of memory");
    if (st != LLMR_OK) {
        llmr_normalizer_free(n);
        return st;
    }
    *out = n;
    return LLMR_OK;
}

static bool unicode_form(kind k, const char *text, size_t len, llmr_strbuf *out)
{
    int options = UTF8PROC_STABLE;
    if (k == NFC || k == NFKC)
        options |= UTF8PROC_COMPOSE;
    else
        options |= UTF8PROC_DECOMPOSE;
    if (k == NFKC || k == NFKD)
        options |= UTF8PROC_COMPAT;
    utf8proc_uint8_t *result = NULL;
    utf8proc_ssize_t n = utf8proc_map((const utf8proc_uint8_t *)text, (utf8proc_ssize_t)len,
                                      &result, (utf8proc_option_t)options);
    if (n < 0)
        return false;
    llmr_strbuf_append(out, result, (size_t)n);
    free(result);
    return !llmr_strbuf_failed(out);
}

static void lowercase(const char *text, size_t len, llmr_strbuf *out)
{
    size_t i = 0;
    while (i < len) {
        unsigned char c = (unsigned char)text[i];
        if (c < 0x80) {
            llmr_strbuf_putc(out, (char)(c >= 'A' && c <= 'Z' ? c + 32 : c));
            i++;
            continue;
        }
        size_t n;
        uint32_t cp = llmr_uc_decode(text + i, len - i, &n);
        uint32_t lower[3];
        size_t k = llmr_uc_to_lower(cp, lower);
        for (size_t j = 0; j < k; j++) {
            char b[4];
            llmr_strbuf_append(out, b, llmr_uc_encode(lower[j], b));
        }
        i += n;
    }
}

static void strip(const llmr_normalizer *n, const char *text, size_t len, llmr_strbuf *out)
{
    size_t start = 0, end = len;
    while (n->left && start < end) {
        size_t k;
        uint32_t cp = llmr_uc_decode(text + start, end - start, &k);
        if (!llmr_uc_is_whitespace(cp))
            break;
        start += k;
    }
    while (n->right && end > start) {
        size_t b = end - 1;
        while (b > start && ((unsigned char)text[b] & 0xc0) == 0x80)
            b--;
        size_t k;
        if (!llmr_uc_is_whitespace(llmr_uc_decode(text + b, end - b, &k)))
            break;
        end = b;
    }
    llmr_strbuf_append(out, text + start, end - start);
}

bool llmr_normalizer_apply(const llmr_normalizer *n, const char *text, size_t len,
                           llmr_strbuf *out, llmr_strbuf *err)
{
    llmr_strbuf_reset(out);
    bool ok = true;
    switch (n->kind) {
    case NFC:
    case NFD:
    case NFKC:
    case NFKD:
        ok = unicode_form(n->kind, text, len, out);
        if (!ok)
            llmr_strbuf_puts(err, "Unicode normalization failed");
        break;
    case LOWERCASE:
        lowercase(text, len, out);
        break;
    case STRIP:
        strip(n, text, len, out);
        break;
    case PREPEND:
        if (len)
            llmr_strbuf_append(out, n->text, n->text_len);
        llmr_strbuf_append(out, text, len);
        break;
    case REPLACE:
        ok = llmr_regex_replace_all(n->pattern, text, len, n->text, n->text_len, out, err);
        break;
    case SEQUENCE: {
        llmr_strbuf tmp = LLMR_STRBUF_INIT;
        llmr_strbuf_append(out, text, len);
        for (size_t i = 0; ok && i < n->n_steps; i++) {
            ok = llmr_normalizer_apply(n->steps[i], out->data ? out->data : "", out->len, &tmp, err);
            llmr_strbuf swap = *out;
            *out = tmp;
            tmp = swap;
        }
        llmr_strbuf_free(&tmp);
        break;
    }
    }
    if (ok && llmr_strbuf_failed(out)) {
        llmr_strbuf_puts(err, "out of memory");
        ok = false;
    }
    return ok;
}
