/* tokenizer.json: loading and the encode/decode pipelines.  See tokenizer.h.
 *
 * Loading walks the document with the streaming reader: the model's vocab and
 * merges (the bulk of the file) go straight into hash tables; the small components
 * are handed to jansson and built by their own modules. */
#include "tokenizer/tokenizer.h"

#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/fs_util.h"
#include "common/json_scan.h"
#include "common/log.h"
#include "common/utf8.h"
#include "tokenizer/added_tokens.h"
#include "tokenizer/bpe.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/decoder.h"
#include "tokenizer/normalizer.h"
#include "tokenizer/postprocessor.h"
#include "tokenizer/pretokenizer.h"
#include "tokenizer/unicode.h"

enum { ID_NONE, ID_MODEL, ID_ADDED, ID_SPECIAL };

typedef struct id_entry {
    uint32_t off, len; /* into strings */
    uint8_t kind;
} id_entry;

struct llmr_tokenizer {
    id_entry *by_id;
    uint32_t n_ids;
    llmr_strbuf strings;
    llmr_token_map surface; /* model vocabulary: string -> id */
    llmr_token_map added_map; /* added tokens: content -> id */
    llmr_added_tokens added;
    bool any_normalized_added;
    llmr_normalizer *normalizer;
    llmr_pretokenizer *pretokenizer;
    llmr_bpe bpe;
    llmr_decoder *decoder;
    llmr_postprocessor *post;
};

/* --- loading ------------------------------------------------------------- */

typedef struct merge_ref {
    uint32_t a_off, a_len, b_off, b_len;
} merge_ref;

typedef struct model_spec {
    char *type, *unk_token, *prefix, *suffix;
    bool ignore_merges, byte_fallback, fuse_unk, have_vocab, have_merges, vocab_not_object;
    uint32_t *vocab_order; /* the vocabulary's ids in the order the file gives them */
    size_t n_vocab, cap_vocab, n_in_surface; /* the first n_in_surface are in the map */
    llmr_strbuf merge_pool;
    merge_ref *merges;
    size_t n_merges, cap_merges;
} model_spec;

typedef struct raw_part {
    const char *text;
    size_t len;
} raw_part;

typedef struct loader {
    llmr_jscan s;
    llmr_strbuf key, str;
    llmr_tokenizer *tok;
    model_spec model;
    raw_part added, normalizer, pre_tokenizer, post_processor, decoder;
    llmr_strbuf *err;
    llmr_status status;
} loader;

static void fail(loader *l, llmr_status code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static void fail(loader *l, llmr_status code, const char *fmt, ...)
{
    if (l->status != LLMR_OK)
        return;
    l->status = code;
    va_list ap;
    va_start(ap, fmt);
    llmr_strbuf_vprintf(l->err, fmt, ap);
    va_end(ap);
}

static void scan_failed(loader *l, const char *where)
{
    fail(l, LLMR_MODEL_CORRUPT, "%s: %s", where, l->s.error);
}

static bool ensure_id(llmr_tokenizer *t, uint32_t id)
{
    if (id < t->n_ids)
        return true;
    uint32_t n = t->n_ids ? t->n_ids : 1024;
    while (n <= id)
        n = n > (UINT32_MAX / 2) ? id + 1 : n * 2;
    id_entry *v = realloc(t->by_id, (size_t)n * sizeof *v);
    if (!v)
        return false;
    memset(v + t->n_ids, 0, (size_t)(n - t->n_ids) * sizeof *v);
    t->by_id = v;
    t->n_ids = n;
    return true;
}

/* Optional string or null into *out (malloc'd). */
static void read_opt_string(loader *l, const char *name, char **out)
{
    if (llmr_jscan_null(&l->s))
        return;
    llmr_strbuf_reset(&l->str);
    if (!llmr_jscan_string(&l->s, &l->str)) {
        fail(l, LLMR_MODEL_CORRUPT, "model.%s must be a string or null (%s)", name, l->s.error);
        return;
    }
    free(*out);
    *out = strdup(llmr_strbuf_cstr(&l->str));
}

static void read_opt_bool(loader *l, const char *name, bool *out)
{
    if (llmr_jscan_null(&l->s))
        return;
    if (!llmr_jscan_bool(&l->s, out))
        fail(l, LLMR_MODEL_CORRUPT, "model.%s must be true, false or null", name);
}

/* Keys of a bulk insert are hashed and their slots prefetched this many at a time. */
#define MAP_BATCH 16

/* Adds the vocabulary to the surface map in the file's order, in one pass over a table
 * sized for it: a duplicate string is reported with the id it is given the second time. */
static void build_surface(loader *l)
{
    llmr_tokenizer *t = l->tok;
    model_spec *m = &l->model;
    if (!llmr_token_map_reserve(&t->surface, m->n_vocab)) {
        fail(l, LLMR_OOM_RAM, "out of memory reading model.vocab");
        return;
    }
    const char *pool = llmr_strbuf_cstr(&t->strings);
    for (size_t i0 = m->n_in_surface; i0 < m->n_vocab; i0 += MAP_BATCH) {
        size_t nb = m->n_vocab - i0 < MAP_BATCH ? m->n_vocab - i0 : MAP_BATCH;
        uint64_t h[MAP_BATCH];
        for (size_t k = 0; k < nb; k++) {
            const id_entry *e = &t->by_id[m->vocab_order[i0 + k]];
            h[k] = llmr_token_map_hash(pool + e->off, e->len);
            llmr_token_map_prefetch(&t->surface, h[k]);
        }
        for (size_t k = 0; k < nb; k++) {
            uint32_t id = m->vocab_order[i0 + k];
            const id_entry *e = &t->by_id[id];
            int r = llmr_token_map_put_hashed(&t->surface, pool + e->off, e->len, h[k], id);
            if (r <= 0) {
                if (r < 0)
                    fail(l, LLMR_OOM_RAM, "out of memory reading model.vocab");
                else
                    fail(l, LLMR_MODEL_CORRUPT, "model.vocab: a token appears twice (id %u)", id);
                return;
            }
        }
    }
    m->n_in_surface = m->n_vocab;
}

static bool add_vocab_order(model_spec *m, uint32_t id)
{
    if (m->n_vocab == m->cap_vocab) {
        size_t cap = m->cap_vocab ? m->cap_vocab * 2 : 4096;
        uint32_t *v = realloc(m->vocab_order, cap * sizeof *v);
        if (!v)
            return false;
        m->vocab_order = v;
        m->cap_vocab = cap;
    }
    m->vocab_order[m->n_vocab++] = id;
    return true;
}

static void read_vocab(loader *l)
{
    llmr_tokenizer *t = l->tok;
    if (!llmr_jscan_object_begin(&l->s)) {
        scan_failed(l, "model.vocab");
        return;
    }
    for (;;) {
        /* The key is decoded straight onto the end of the strings pool. */
        size_t off = t->strings.len;
        bool more = llmr_jscan_object_next_into(&l->s, &t->strings);
        if (!more)
            break;
        size_t klen = t->strings.len - off;
        int64_t id;
        if (!llmr_jscan_int(&l->s, &id))
            break;
        if (id < 0 || id > LLMR_TOKENIZER_MAX_ID) {
            fail(l, LLMR_LIMIT_EXCEEDED, "model.vocab: id %lld is outside 0..%u", (long long)id,
                 LLMR_TOKENIZER_MAX_ID);
            return;
        }
        if (!ensure_id(t, (uint32_t)id) || !add_vocab_order(&l->model, (uint32_t)id)) {
            fail(l, LLMR_OOM_RAM, "out of memory reading model.vocab");
            return;
        }
        id_entry *e = &t->by_id[id];
        if (e->kind != ID_NONE) {
            fail(l, LLMR_MODEL_CORRUPT, "model.vocab: id %lld is given to two tokens", (long long)id);
            return;
        }
        *e = (id_entry){(uint32_t)off, (uint32_t)klen, ID_MODEL};
    }
    if (l->s.failed)
        scan_failed(l, "model.vocab");
    else if (llmr_strbuf_failed(&t->strings) || t->strings.len > UINT32_MAX)
        fail(l, LLMR_OOM_RAM, "out of memory reading model.vocab");
    else
        build_surface(l);
    l->model.have_vocab = true;
}

/* Records a merge whose two strings were just decoded onto the pool: the left at
 * [off, mid), the right at [mid, end of pool). */
static bool add_merge(model_spec *m, size_t off, size_t mid)
{
    if (m->n_merges == m->cap_merges) {
        size_t cap = m->cap_merges ? m->cap_merges * 2 : 4096;
        merge_ref *v = realloc(m->merges, cap * sizeof *v);
        if (!v)
            return false;
        m->merges = v;
        m->cap_merges = cap;
    }
    if (llmr_strbuf_failed(&m->merge_pool) || m->merge_pool.len > UINT32_MAX)
        return false;
    m->merges[m->n_merges++] = (merge_ref){(uint32_t)off, (uint32_t)(mid - off), (uint32_t)mid,
                                           (uint32_t)(m->merge_pool.len - mid)};
    return true;
}

static void read_merges(loader *l)
{
    if (!llmr_jscan_array_begin(&l->s)) {
        scan_failed(l, "model.merges");
        return;
    }
    while (llmr_jscan_array_next(&l->s)) {
        size_t rank = l->model.n_merges;
        llmr_strbuf *pool = &l->model.merge_pool;
        size_t off = pool->len, mid;
        bool ok;
        if (llmr_jscan_peek(&l->s) == '[') {
            /* ["a", "b"] */
            ok = llmr_jscan_array_begin(&l->s) && llmr_jscan_array_next(&l->s) &&
                 llmr_jscan_string(&l->s, pool);
            mid = pool->len;
            ok = ok && llmr_jscan_array_next(&l->s) && llmr_jscan_string(&l->s, pool) &&
                 !llmr_jscan_array_next(&l->s) && !l->s.failed;
            if (!ok) {
                if (!l->s.failed)
                    fail(l, LLMR_MODEL_CORRUPT, "model.merges[%zu] must be two strings", rank);
                break;
            }
        } else {
            /* "a b": exactly one space, which is dropped */
            if (!llmr_jscan_string(&l->s, pool))
                break;
            size_t n = pool->len - off;
            char *m = n ? pool->data + off : NULL;
            char *sp = n ? memchr(m, ' ', n) : NULL;
            if (!sp || memchr(sp + 1, ' ', n - (size_t)(sp + 1 - m))) {
                fail(l, LLMR_MODEL_CORRUPT,
                     "model.merges[%zu] must be \"left right\" with exactly one space", rank);
                return;
            }
            mid = (size_t)(sp - pool->data);
            memmove(sp, sp + 1, n - (size_t)(sp + 1 - m));
            pool->len--;
        }
        ok = add_merge(&l->model, off, mid);
        if (!ok) {
            fail(l, LLMR_OOM_RAM, "out of memory reading model.merges");
            return;
        }
    }
    if (l->s.failed)
        scan_failed(l, "model.merges");
    l->model.have_merges = true;
}

static void read_model(loader *l)
{
    if (!llmr_jscan_object_begin(&l->s)) {
        scan_failed(l, "model");
        return;
    }
    llmr_strbuf name = LLMR_STRBUF_INIT;
    while (l->status == LLMR_OK && llmr_jscan_object_next(&l->s, &name)) {
        const char *k = llmr_strbuf_cstr(&name);
        if (strcmp(k, "type") == 0) {
            read_opt_string(l, "type", &l->model.type);
        } else if (strcmp(k, "unk_token") == 0) {
            read_opt_string(l, "unk_token", &l->model.unk_token);
        } else if (strcmp(k, "continuing_subword_prefix") == 0) {
            read_opt_string(l, "continuing_subword_prefix", &l->model.prefix);
        } else if (strcmp(k, "end_of_word_suffix") == 0) {
            read_opt_string(l, "end_of_word_suffix", &l->model.suffix);
        } else if (strcmp(k, "ignore_merges") == 0) {
            read_opt_bool(l, "ignore_merges", &l->model.ignore_merges);
        } else if (strcmp(k, "byte_fallback") == 0) {
            read_opt_bool(l, "byte_fallback", &l->model.byte_fallback);
        } else if (strcmp(k, "fuse_unk") == 0) {
            read_opt_bool(l, "fuse_unk", &l->model.fuse_unk);
        } else if (strcmp(k, "dropout") == 0) {
            const char *raw;
            size_t n;
            if (!llmr_jscan_null(&l->s)) {
                if (!llmr_jscan_raw(&l->s, &raw, &n)) {
                    scan_failed(l, "model.dropout");
                } else if (strtod(raw, NULL) != 0.0) {
                    fail(l, LLMR_UNSUPPORTED, "model.dropout is %.*s: BPE dropout makes encoding "
                                              "random and is not supported",
                         (int)(n > 20 ? 20 : n), raw);
                }
            }
        } else if (strcmp(k, "vocab") == 0) {
            if (llmr_jscan_peek(&l->s) == '{') {
                read_vocab(l);
            } else if (!llmr_jscan_skip(&l->s)) { /* another model's vocab (Unigram: a list) */
                scan_failed(l, "model.vocab");
            } else {
                l->model.vocab_not_object = true;
            }
        } else if (strcmp(k, "merges") == 0) {
            read_merges(l);
        } else if (!llmr_jscan_skip(&l->s)) {
            scan_failed(l, "model");
        }
    }
    if (l->s.failed && l->status == LLMR_OK)
        scan_failed(l, "model");
    llmr_strbuf_free(&name);
}

static void read_top(loader *l)
{
    if (!llmr_jscan_object_begin(&l->s)) {
        scan_failed(l, "tokenizer.json");
        return;
    }
    while (l->status == LLMR_OK && llmr_jscan_object_next(&l->s, &l->key)) {
        const char *k = llmr_strbuf_cstr(&l->key);
        raw_part *part = strcmp(k, "added_tokens") == 0     ? &l->added
                         : strcmp(k, "normalizer") == 0     ? &l->normalizer
                         : strcmp(k, "pre_tokenizer") == 0  ? &l->pre_tokenizer
                         : strcmp(k, "post_processor") == 0 ? &l->post_processor
                         : strcmp(k, "decoder") == 0        ? &l->decoder
                                                            : NULL;
        if (strcmp(k, "model") == 0) {
            read_model(l);
        } else if (part) {
            if (!llmr_jscan_raw(&l->s, &part->text, &part->len))
                scan_failed(l, k);
        } else if (!llmr_jscan_skip(&l->s)) {
            scan_failed(l, "tokenizer.json");
        }
    }
    if (l->status == LLMR_OK && l->s.failed)
        scan_failed(l, "tokenizer.json");
    if (l->status == LLMR_OK && !llmr_jscan_at_end(&l->s))
        scan_failed(l, "tokenizer.json: text after the top-level object");
}

/* Parses a small captured part with jansson (NULL for an absent part). */
static json_t *part_json(loader *l, const raw_part *p, const char *name)
{
    if (!p->text || l->status != LLMR_OK)
        return NULL;
    json_error_t e;
    json_t *j = json_loadb(p->text, p->len, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, &e);
    if (!j)
        fail(l, LLMR_MODEL_CORRUPT, "%s: %s", name, e.text);
    return j;
}

static void build_component(loader *l, llmr_status st)
{
    if (st != LLMR_OK && l->status == LLMR_OK)
        l->status = st; /* the message is already in err */
}

static void add_added_tokens(loader *l, const json_t *list)
{
    llmr_tokenizer *t = l->tok;
    if (!list)
        return;
    if (!json_is_array(list)) {
        fail(l, LLMR_MODEL_CORRUPT, "added_tokens must be an array");
        return;
    }
    t->added.v = calloc(json_array_size(list) ? json_array_size(list) : 1, sizeof *t->added.v);
    if (!t->added.v) {
        fail(l, LLMR_OOM_RAM, "out of memory");
        return;
    }
    size_t i;
    const json_t *e;
    json_array_foreach(list, i, e) {
        const json_t *content = json_object_get(e, "content");
        const json_t *id = json_object_get(e, "id");
        if (!json_is_string(content) || !json_is_integer(id) || json_integer_value(id) < 0 ||
            json_integer_value(id) > LLMR_TOKENIZER_MAX_ID) {
            fail(l, LLMR_MODEL_CORRUPT, "added_tokens[%zu] needs a string \"content\" and an id "
                                        "from 0 to %u",
                 i, LLMR_TOKENIZER_MAX_ID);
            return;
        }
        llmr_added_token *a = &t->added.v[t->added.n];
        a->len = json_string_length(content);
        a->content = malloc(a->len + 1);
        if (!a->content) {
            fail(l, LLMR_OOM_RAM, "out of memory");
            return;
        }
        memcpy(a->content, json_string_value(content), a->len + 1);
        a->match = a->content;
        a->match_len = a->len;
        t->added.n++;
        a->special = json_is_true(json_object_get(e, "special"));
        a->single_word = json_is_true(json_object_get(e, "single_word"));
        a->lstrip = json_is_true(json_object_get(e, "lstrip"));
        a->rstrip = json_is_true(json_object_get(e, "rstrip"));
        const json_t *norm = json_object_get(e, "normalized");
        a->normalized = norm ? json_is_true(norm) : !a->special;
        /* As tokenizers does: a token already in the vocabulary keeps the vocabulary's id. */
        int64_t vocab_id = llmr_token_map_get(&t->surface, a->content, a->len);
        a->id = vocab_id >= 0 ? (uint32_t)vocab_id : (uint32_t)json_integer_value(id);
        if (vocab_id >= 0 && vocab_id != json_integer_value(id))
            llmr_log_warn("tokenizer", "added token %zu has id %lld, but the vocabulary gives it %lld",
                          i, (long long)json_integer_value(id), (long long)vocab_id);
        if (!ensure_id(t, a->id) || llmr_token_map_put(&t->added_map, a->content, a->len, a->id) < 0) {
            fail(l, LLMR_OOM_RAM, "out of memory");
            return;
        }
        t->by_id[a->id] = (id_entry){(uint32_t)t->strings.len, (uint32_t)a->len,
                                     (uint8_t)(a->special ? ID_SPECIAL : ID_ADDED)};
        llmr_strbuf_append(&t->strings, a->content, a->len);
        if (a->normalized && t->normalizer) {
            llmr_strbuf n = LLMR_STRBUF_INIT;
            if (!llmr_normalizer_apply(t->normalizer, a->content, a->len, &n, l->err)) {
                llmr_strbuf_free(&n);
                fail(l, LLMR_MODEL_CORRUPT, " (normalizing added token %zu)", i);
                return;
            }
            a->match_len = n.len;
            a->match = llmr_strbuf_take(&n);
            if (!a->match) {
                a->match = a->content;
                fail(l, LLMR_OOM_RAM, "out of memory");
                return;
            }
        }
        t->any_normalized_added |= a->normalized;
    }
    if (!llmr_added_tokens_index(&t->added) || llmr_strbuf_failed(&t->strings))
        fail(l, LLMR_OOM_RAM, "out of memory");
}

static int64_t surface_id(const llmr_tokenizer *t, const char *s, size_t n)
{
    return llmr_token_map_get(&t->surface, s, n);
}

/* Resolves the merges' strings to ids: left, right and the merged token must all be
 * in the vocabulary.  The lookups hit large tables at random, so merges are done in
 * batches: hash and prefetch a batch's slots, then look them up. */
#define MERGE_BATCH 16

static bool resolve_merges(loader *l, llmr_bpe *b)
{
    const model_spec *m = &l->model;
    const llmr_token_map *v = &l->tok->surface;
    const char *pool = llmr_strbuf_cstr(&m->merge_pool);
    llmr_strbuf joined = LLMR_STRBUF_INIT;
    size_t strip = b->prefix_len;
    bool ok = true;
    for (size_t r0 = 0; ok && r0 < m->n_merges; r0 += MERGE_BATCH) {
        size_t nb = m->n_merges - r0 < MERGE_BATCH ? m->n_merges - r0 : MERGE_BATCH;
        uint64_t ha[MERGE_BATCH], hb[MERGE_BATCH], hj[MERGE_BATCH];
        int64_t ia[MERGE_BATCH], ib[MERGE_BATCH], im[MERGE_BATCH];
        size_t joff[MERGE_BATCH + 1];
        const merge_ref *ref = m->merges + r0;
        for (size_t k = 0; k < nb; k++) {
            ha[k] = llmr_token_map_hash(pool + ref[k].a_off, ref[k].a_len);
            hb[k] = llmr_token_map_hash(pool + ref[k].b_off, ref[k].b_len);
            llmr_token_map_prefetch(v, ha[k]);
            llmr_token_map_prefetch(v, hb[k]);
        }
        llmr_strbuf_reset(&joined);
        for (size_t k = 0; k < nb; k++) {
            ia[k] = llmr_token_map_get_hashed(v, pool + ref[k].a_off, ref[k].a_len, ha[k]);
            ib[k] = llmr_token_map_get_hashed(v, pool + ref[k].b_off, ref[k].b_len, hb[k]);
            size_t cut = ref[k].b_len < strip ? ref[k].b_len : strip;
            joff[k] = joined.len;
            llmr_strbuf_append(&joined, pool + ref[k].a_off, ref[k].a_len);
            llmr_strbuf_append(&joined, pool + ref[k].b_off + cut, ref[k].b_len - cut);
        }
        joff[nb] = joined.len;
        if (llmr_strbuf_failed(&joined)) {
            fail(l, LLMR_OOM_RAM, "out of memory");
            break;
        }
        for (size_t k = 0; k < nb; k++) {
            hj[k] = llmr_token_map_hash(joined.data + joff[k], joff[k + 1] - joff[k]);
            llmr_token_map_prefetch(v, hj[k]);
        }
        for (size_t k = 0; k < nb; k++) {
            im[k] = llmr_token_map_get_hashed(v, joined.data + joff[k], joff[k + 1] - joff[k], hj[k]);
            if (ia[k] >= 0 && ib[k] >= 0)
                llmr_merge_map_prefetch(&b->merges, (uint32_t)ia[k], (uint32_t)ib[k]);
        }
        for (size_t k = 0; k < nb; k++) {
            size_t r = r0 + k;
            if (ia[k] < 0 || ib[k] < 0 || ref[k].b_len < strip) {
                fail(l, LLMR_MODEL_CORRUPT, "model.merges[%zu]: a token of the pair is not in the vocabulary", r);
                ok = false;
                break;
            }
            if (im[k] < 0) {
                fail(l, LLMR_MODEL_CORRUPT, "model.merges[%zu]: the merged token is not in the vocabulary", r);
                ok = false;
                break;
            }
            if (!llmr_merge_map_put(&b->merges, (uint32_t)ia[k], (uint32_t)ib[k], (uint32_t)r, (uint32_t)im[k])) {
                fail(l, LLMR_OOM_RAM, "out of memory");
                ok = false;
                break;
            }
        }
    }
    llmr_strbuf_free(&joined);
    return ok && l->status == LLMR_OK;
}

/* The byte-level map of the vocabulary (bytes -> id): filled by build_byte_map,
 * possibly on its own thread, reading only the vocabulary. */
typedef struct byte_map_job {
    llmr_tokenizer *tok;
    bool ok; /* false: out of memory */
} byte_map_job;

static void build_byte_map(byte_map_job *job)
{
    llmr_tokenizer *t = job->tok;
    llmr_bpe *b = &t->bpe;
    if (!llmr_token_map_init(&b->bytes, t->surface.count)) {
        job->ok = false;
        return;
    }
    llmr_strbuf bytes = LLMR_STRBUF_INIT;
    uint32_t batch_id[MAP_BATCH];
    size_t batch_off[MAP_BATCH + 1];
    uint64_t h[MAP_BATCH];
    for (uint32_t id0 = 0; id0 < t->n_ids && job->ok;) {
        /* Decode a batch, hash and prefetch its slots, then add it. */
        size_t nb = 0;
        llmr_strbuf_reset(&bytes);
        for (; id0 < t->n_ids && nb < MAP_BATCH; id0++) {
            if (t->by_id[id0].kind != ID_MODEL)
                continue;
            size_t before = bytes.len;
            const char *s = llmr_strbuf_cstr(&t->strings) + t->by_id[id0].off;
            if (!llmr_byte_level_decode(s, t->by_id[id0].len, &bytes))
                continue; /* not made of byte-level characters: byte-level text never forms it */
            batch_id[nb] = id0;
            batch_off[nb++] = before;
        }
        batch_off[nb] = bytes.len;
        if (llmr_strbuf_failed(&bytes)) {
            job->ok = false;
            break;
        }
        for (size_t k = 0; k < nb; k++) {
            h[k] = llmr_token_map_hash(bytes.data + batch_off[k], batch_off[k + 1] - batch_off[k]);
            llmr_token_map_prefetch(&b->bytes, h[k]);
        }
        for (size_t k = 0; k < nb; k++) {
            if (llmr_token_map_put_hashed(&b->bytes, bytes.data + batch_off[k], batch_off[k + 1] - batch_off[k],
                                          h[k], batch_id[k]) < 0) {
                job->ok = false;
                break;
            }
        }
    }
    llmr_strbuf_free(&bytes);
}

static void *build_byte_map_thread(void *arg)
{
    build_byte_map(arg);
    return NULL;
}

static void build_bpe(loader *l, bool byte_level)
{
    llmr_tokenizer *t = l->tok;
    model_spec *m = &l->model;
    llmr_bpe *b = &t->bpe;
    if (m->type && strcmp(m->type, "BPE") != 0) {
        fail(l, LLMR_UNSUPPORTED, "model type \"%s\" is not supported (supported: BPE)", m->type);
        return;
    }
    if (!m->have_vocab) {
        fail(l, LLMR_MODEL_CORRUPT, "model has no vocab");
        return;
    }
    b->byte_mode = byte_level;
    b->ignore_merges = m->ignore_merges;
    b->byte_fallback = m->byte_fallback;
    b->fuse_unk = m->fuse_unk;
    b->surface = &t->surface;
    b->unk_id = -1;
    if (m->unk_token) {
        b->unk_id = surface_id(t, m->unk_token, strlen(m->unk_token));
        if (b->unk_id < 0) {
            fail(l, LLMR_MODEL_CORRUPT, "model.unk_token is not in the vocabulary");
            return;
        }
    }
    if (m->prefix) {
        b->prefix = strdup(m->prefix);
        b->prefix_len = strlen(m->prefix);
    }
    if (m->suffix) {
        b->suffix = strdup(m->suffix);
        b->suffix_len = strlen(m->suffix);
    }
    if (!llmr_merge_map_init(&b->merges, m->n_merges)) {
        fail(l, LLMR_OOM_RAM, "out of memory");
        return;
    }
    /* Byte mode keys the vocabulary by the bytes its strings stand for too: that map is
     * built on a second thread while this one resolves the merges (both only read the
     * vocabulary), which takes a third off the load of a 200,000-token tokenizer. */
    byte_map_job job = {t, true};
    pthread_t helper;
    bool threaded = byte_level && pthread_create(&helper, NULL, build_byte_map_thread, &job) == 0;
    if (byte_level && !threaded)
        build_byte_map(&job);
    bool resolved = resolve_merges(l, b) && llmr_bpe_index_low_pairs(b);
    if (threaded)
        pthread_join(helper, NULL);
    if (!resolved) {
        if (l->status == LLMR_OK)
            fail(l, LLMR_OOM_RAM, "out of memory");
        return;
    }
    if (!job.ok) {
        fail(l, LLMR_OOM_RAM, "out of memory");
        return;
    }
    char name[8];
    for (int x = 0; x < 256; x++) {
        snprintf(name, sizeof name, "<0x%02X>", x);
        b->fallback[x] = surface_id(t, name, 6);
        b->byte_token[x] = -1;
    }
    if (!byte_level)
        return;
    for (int x = 0; x < 256; x++) {
        char c = (char)x;
        b->byte_token[x] = llmr_token_map_get(&b->bytes, &c, 1);
        if (b->byte_token[x] >= 0 || !b->byte_fallback)
            continue;
        char enc[4];
        size_t n = llmr_uc_encode(llmr_byte_level_char((uint8_t)x), enc);
        bool all = true;
        for (size_t k = 0; k < n; k++)
            all = all && b->fallback[(unsigned char)enc[k]] >= 0;
        for (size_t k = 0; all && k < n; k++)
            b->byte_fallback_tokens[x][k] = b->fallback[(unsigned char)enc[k]];
        b->byte_fallback_count[x] = all ? (uint8_t)n : 0;
    }
}

void llmr_tokenizer_free(llmr_tokenizer *t)
{
    if (!t)
        return;
    free(t->by_id);
    llmr_strbuf_free(&t->strings);
    llmr_token_map_free(&t->surface);
    llmr_token_map_free(&t->added_map);
    llmr_added_tokens_free(&t->added);
    llmr_normalizer_free(t->normalizer);
    llmr_pretokenizer_free(t->pretokenizer);
    llmr_bpe_free(&t->bpe);
    llmr_decoder_free(t->decoder);
    llmr_postprocessor_free(t->post);
    free(t);
}

static void free_model_spec(model_spec *m)
{
    free(m->type);
    free(m->unk_token);
    free(m->prefix);
    free(m->suffix);
    llmr_strbuf_free(&m->merge_pool);
    free(m->merges);
    free(m->vocab_order);
}

llmr_status llmr_tokenizer_load(const char *json, size_t len, llmr_tokenizer **out,
                                llmr_strbuf *err)
{
    *out = NULL;
    loader l;
    memset(&l, 0, sizeof l);
    l.err = err;
    l.status = LLMR_OK;
    llmr_jscan_init(&l.s, json, len);
    llmr_tokenizer *t = l.tok = calloc(1, sizeof *t);
    if (!t || !llmr_token_map_init(&t->surface, 1024) || !llmr_token_map_init(&t->added_map, 16)) {
        llmr_strbuf_puts(err, "out of memory");
        llmr_tokenizer_free(t);
        return LLMR_OOM_RAM;
    }
    read_top(&l);
    if (l.status == LLMR_OK && l.model.type && strcmp(l.model.type, "BPE") != 0)
        fail(&l, LLMR_UNSUPPORTED, "model type \"%s\" is not supported (supported: BPE)", l.model.type);
    if (l.status == LLMR_OK && l.model.vocab_not_object)
        fail(&l, LLMR_MODEL_CORRUPT, "model.vocab must be an object of token -> id");
    if (l.status == LLMR_OK && !l.model.have_vocab && !l.model.type)
        fail(&l, LLMR_MODEL_CORRUPT, "tokenizer.json has no model");

    json_t *normalizer = part_json(&l, &l.normalizer, "normalizer");
    json_t *pre = part_json(&l, &l.pre_tokenizer, "pre_tokenizer");
    json_t *post = part_json(&l, &l.post_processor, "post_processor");
    json_t *decoder = part_json(&l, &l.decoder, "decoder");
    json_t *added = part_json(&l, &l.added, "added_tokens");
    bool byte_level = false;
    if (l.status == LLMR_OK)
        build_component(&l, llmr_normalizer_build(normalizer, &t->normalizer, err));
    if (l.status == LLMR_OK)
        build_component(&l, llmr_pretokenizer_build(pre, &t->pretokenizer, &byte_level, err));
    if (l.status == LLMR_OK)
        build_bpe(&l, byte_level);
    if (l.status == LLMR_OK)
        add_added_tokens(&l, added);
    if (l.status == LLMR_OK)
        build_component(&l, llmr_decoder_build(decoder, &t->decoder, err));
    if (l.status == LLMR_OK)
        build_component(&l, llmr_postprocessor_build(post, &t->post, err));
    json_decref(normalizer);
    json_decref(pre);
    json_decref(post);
    json_decref(decoder);
    json_decref(added);
    free_model_spec(&l.model);
    llmr_strbuf_free(&l.key);
    llmr_strbuf_free(&l.str);
    if (l.status != LLMR_OK) {
        llmr_tokenizer_free(t);
        return l.status;
    }
    *out = t;
    return LLMR_OK;
}

llmr_status llmr_tokenizer_load_file(const char *path, llmr_tokenizer **out, llmr_strbuf *err)
{
    char *data;
    size_t len;
    llmr_strbuf why = LLMR_STRBUF_INIT;
    llmr_status st = llmr_read_file(path, LLMR_TOKENIZER_MAX_BYTES, &data, &len, &why);
    if (st != LLMR_OK) {
        llmr_strbuf_printf(err, "%s: %s", path, llmr_strbuf_cstr(&why));
        llmr_strbuf_free(&why);
        *out = NULL;
        return st;
    }
    llmr_strbuf_free(&why);
    st = llmr_tokenizer_load(data, len, out, err);
    free(data);
    return st;
}

/* --- encode / decode --------------------------------------------------------- */

llmr_status llmr_tokenizer_encode(const llmr_tokenizer *t, const char *text, size_t len,
                                  unsigned flags, llmr_ids *out, llmr_strbuf *err)
{
    return llmr_tokenizer_encode_text(t, text, len, flags, NULL, 0, out, err);
}

llmr_status llmr_tokenizer_encode_text(const llmr_tokenizer *t, const char *text, size_t len,
                                       unsigned flags, const llmr_text_span *plain, size_t n_plain,
                                       llmr_ids *out, llmr_strbuf *err)
{
    size_t bad;
    if (!llmr_text_spans_valid(plain, n_plain, len)) {
        llmr_strbuf_puts(err, "the text's plain spans are out of order or past its end");
        return LLMR_INVALID_ARGUMENT;
    }
    llmr_text_spans spans = {(llmr_text_span *)plain, n_plain, n_plain, false};
    if (!llmr_utf8_valid(text, len, &bad)) {
        llmr_strbuf_printf(err, "the text is not valid UTF-8 at byte %zu", bad);
        return LLMR_INVALID_ARGUMENT;
    }
    llmr_status st = LLMR_OK;
    llmr_strbuf arena = LLMR_STRBUF_INIT;
    llmr_pieces a = {NULL, 0, 0, &arena, false}, b = {NULL, 0, 0, &arena, false};
    llmr_ids ids = LLMR_IDS_INIT;
    llmr_strbuf norm = LLMR_STRBUF_INIT;
    bool parse_special = flags & LLMR_ENCODE_PARSE_SPECIAL;

    llmr_strbuf_append(&arena, text, len);
    if (len)
        llmr_pieces_push(&a, (llmr_piece){0, len, -1, true, false});
    if (t->added.n) {
        b.n = 0;
        llmr_added_tokens_split(&t->added, false, parse_special, n_plain ? &spans : NULL, &a, &b);
        llmr_pieces swap = a;
        a = b;
        b = swap;
    }
    if (t->normalizer) {
        /* Each text piece is normalized on its own; pieces it empties are dropped. */
        size_t kept = 0;
        for (size_t i = 0; i < a.n && st == LLMR_OK; i++) {
            llmr_piece p = a.v[i];
            if (p.id < 0) {
                if (!llmr_normalizer_apply(t->normalizer, arena.data + p.off, p.len, &norm, err)) {
                    st = LLMR_LIMIT_EXCEEDED;
                    break;
                }
                p.off = arena.len;
                p.len = norm.len;
                llmr_strbuf_append(&arena, llmr_strbuf_cstr(&norm), norm.len);
                if (p.len == 0)
                    continue;
            }
            a.v[kept++] = p;
        }
        a.n = kept;
    }
    if (st == LLMR_OK && t->any_normalized_added) {
        b.n = 0;
        llmr_added_tokens_split(&t->added, true, parse_special, NULL, &a, &b);
        llmr_pieces swap = a;
        a = b;
        b = swap;
    }
    if (st == LLMR_OK && t->pretokenizer && !llmr_pretokenizer_apply(t->pretokenizer, &a, &b, err))
        st = LLMR_LIMIT_EXCEEDED;
    for (size_t i = 0; st == LLMR_OK && i < a.n; i++) {
        const llmr_piece *p = &a.v[i];
        bool ok = p->id >= 0 ? llmr_ids_push(&ids, (uint32_t)p->id)
                             : llmr_bpe_tokenize(&t->bpe, arena.data + p->off, p->len, &ids);
        if (!ok)
            st = LLMR_OOM_RAM;
    }
    if (st == LLMR_OK && (flags & LLMR_ENCODE_ADD_SPECIAL) && t->post &&
        !llmr_postprocessor_apply(t->post, &ids))
        st = LLMR_OOM_RAM;
    if (st == LLMR_OK && (a.failed || b.failed || llmr_strbuf_failed(&arena)))
        st = LLMR_OOM_RAM;
    if (st == LLMR_OK && ids.count) {
        if (!llmr_ids_reserve(out, ids.count)) {
            st = LLMR_OOM_RAM;
        } else {
            memcpy(out->data + out->count, ids.data, ids.count * sizeof *ids.data);
            out->count += ids.count;
        }
    }
    if (st == LLMR_OOM_RAM && err->len == 0)
        llmr_strbuf_puts(err, "out of memory");
    llmr_ids_free(&ids);
    llmr_strbuf_free(&norm);
    llmr_strbuf_free(&arena);
    free(a.v);
    free(b.v);
    return st;
}

llmr_status llmr_tokenizer_decode(const llmr_tokenizer *t, const uint32_t *ids, size_t n,
                                  unsigned flags, llmr_strbuf *out, size_t *unknown,
                                  llmr_strbuf *err)
{
    llmr_token_list list;
    llmr_token_list_init(&list);
    size_t missing = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t id = ids[i];
        if (id >= t->n_ids || t->by_id[id].kind == ID_NONE) {
            missing++;
            continue;
        }
        if ((flags & LLMR_DECODE_SKIP_SPECIAL) && t->by_id[id].kind == ID_SPECIAL)
            continue;
        llmr_token_list_add(&list, llmr_strbuf_cstr(&t->strings) + t->by_id[id].off, t->by_id[id].len);
    }
    if (unknown)
        *unknown = missing;
    llmr_status st = LLMR_OK;
    if (list.failed) {
        llmr_strbuf_puts(err, "out of memory");
        st = LLMR_OOM_RAM;
    } else if (!llmr_decoder_run(t->decoder, &list, out, err)) {
        st = LLMR_LIMIT_EXCEEDED;
    }
    llmr_token_list_free(&list);
    return st;
}

bool llmr_tokenizer_decodes_byte_fallback(const llmr_tokenizer *t)
{
    return llmr_decoder_has_byte_fallback(t->decoder);
}

uint32_t llmr_tokenizer_vocab_size(const llmr_tokenizer *t)
{
    uint32_t n = t->n_ids;
    while (n > 0 && t->by_id[n - 1].kind == ID_NONE)
        n--;
    return n;
}

int64_t llmr_tokenizer_token_to_id(const llmr_tokenizer *t, const char *token, size_t len)
{
    int64_t id = llmr_token_map_get(&t->added_map, token, len);
    return id >= 0 ? id : llmr_token_map_get(&t->surface, token, len);
}

const char *llmr_tokenizer_id_to_token(const llmr_tokenizer *t, uint32_t id, size_t *len)
{
    if (id >= t->n_ids || t->by_id[id].kind == ID_NONE) {
        *len = 0;
        return NULL;
    }
    *len = t->by_id[id].len;
    return llmr_strbuf_cstr(&t->strings) + t->by_id[id].off;
}

size_t llmr_tokenizer_special_count(const llmr_tokenizer *t)
{
    size_t n = 0;
    for (size_t i = 0; i < t->added.n; i++)
        n += t->added.v[i].special;
    return n;
}

const char *llmr_tokenizer_special_text(const llmr_tokenizer *t, size_t i, size_t *len)
{
    for (size_t k = 0; k < t->added.n; k++) {
        if (!t->added.v[k].special)
            continue;
        if (i-- == 0) {
            *len = t->added.v[k].len;
            return t->added.v[k].content;
        }
    }
    *len = 0;
    return NULL;
}

bool llmr_tokenizer_is_special(const llmr_tokenizer *t, uint32_t id)
{
    return id < t->n_ids && t->by_id[id].kind == ID_SPECIAL;
}
