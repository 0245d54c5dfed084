/* Memory a load will take, before loading: the GGUF's metadata read with ggml's gguf
 * reader (no tensor data), and the sizes of a context derived from it.  See
 * lc_engine.h. */
#include <stdio.h>
#include <string.h>

#include "gguf.h"
#include "lc_engine.h"

/* A whole number stored under key (any integer type; an array: its largest element),
 * or `fallback` when the key is missing or not a number.  Never aborts: ggml's typed
 * getters assert on a type mismatch, so the type is checked first. */
static uint64_t get_uint(const struct gguf_context *g, const char *key, uint64_t fallback)
{
    int64_t k = gguf_find_key(g, key);
    if (k < 0)
        return fallback;
    enum gguf_type t = gguf_get_kv_type(g, k);
    const void *data = NULL;
    size_t n = 1;
    if (t == GGUF_TYPE_ARRAY) {
        t = gguf_get_arr_type(g, k);
        n = gguf_get_arr_n(g, k);
        if (n == 0 || t == GGUF_TYPE_STRING || t == GGUF_TYPE_ARRAY)
            return fallback;
        data = gguf_get_arr_data(g, k);
    } else {
        data = gguf_get_val_data(g, k);
    }
    uint64_t best = 0;
    for (size_t i = 0; i < n; i++) {
        uint64_t v;
        switch (t) {
        case GGUF_TYPE_UINT8: v = ((const uint8_t *)data)[i]; break;
        case GGUF_TYPE_INT8: v = ((const int8_t *)data)[i] < 0 ? 0 : (uint64_t)((const int8_t *)data)[i]; break;
        case GGUF_TYPE_UINT16: v = ((const uint16_t *)data)[i]; break;
        case GGUF_TYPE_INT16: v = ((const int16_t *)data)[i] < 0 ? 0 : (uint64_t)((const int16_t *)data)[i]; break;
        case GGUF_TYPE_UINT32: v = ((const uint32_t *)data)[i]; break;
        case GGUF_TYPE_INT32: v = ((const int32_t *)data)[i] < 0 ? 0 : (uint64_t)((const int32_t *)data)[i]; break;
        case GGUF_TYPE_UINT64: v = ((const uint64_t *)data)[i]; break;
        case GGUF_TYPE_INT64: v = ((const int64_t *)data)[i] < 0 ? 0 : (uint64_t)((const int64_t *)data)[i]; break;
        default: return fallback;
        }
        if (v > best)
            best = v;
    }
    return best;
}

static uint32_t clamp32(uint64_t v)
{
    return v > UINT32_MAX ? UINT32_MAX : (uint32_t)v;
}

llmr_status lc_read_shape(const char *path, lc_gguf_shape *out)
{
    memset(out, 0, sizeof *out);
    struct gguf_init_params ip = {.no_alloc = true, .ctx = NULL};
    lc_llama_error_clear();
    struct gguf_context *g = gguf_init_from_file(path, ip);
    if (!g) {
        lc_set_error("%s is not a GGUF file llama.cpp can read%s%s", path,
                     lc_llama_error()[0] ? ": " : "", lc_llama_error());
        return LLMR_MODEL_CORRUPT;
    }
    int64_t k = gguf_find_key(g, "general.architecture");
    if (k < 0 || gguf_get_kv_type(g, k) != GGUF_TYPE_STRING) {
        gguf_free(g);
        lc_set_error("%s has no general.architecture string", path);
        return LLMR_MODEL_CORRUPT;
    }
    snprintf(out->architecture, sizeof out->architecture, "%s", gguf_get_val_str(g, k));
    char key[160];
#define ARCH_KEY(suffix) (snprintf(key, sizeof key, "%s." suffix, out->architecture), key)
    out->n_layer = clamp32(get_uint(g, ARCH_KEY("block_count"), 0));
    out->n_embd = clamp32(get_uint(g, ARCH_KEY("embedding_length"), 0));
    out->n_head = clamp32(get_uint(g, ARCH_KEY("attention.head_count"), 0));
    out->n_head_kv = clamp32(get_uint(g, ARCH_KEY("attention.head_count_kv"), out->n_head));
    uint32_t head_dim = out->n_head ? out->n_embd / out->n_head : 0;
    out->key_length = clamp32(get_uint(g, ARCH_KEY("attention.key_length"), head_dim));
    out->value_length = clamp32(get_uint(g, ARCH_KEY("attention.value_length"), out->key_length));
    out->context_train = clamp32(get_uint(g, ARCH_KEY("context_length"), 0));
    out->sliding_window = clamp32(get_uint(g, ARCH_KEY("attention.sliding_window"), 0));
#undef ARCH_KEY
    int64_t tk = gguf_find_key(g, "tokenizer.ggml.tokens");
    out->vocab_size = tk >= 0 && gguf_get_kv_type(g, tk) == GGUF_TYPE_ARRAY
                          ? clamp32(gguf_get_arr_n(g, tk))
                          : 0;
    gguf_free(g);
    return LLMR_OK;
}

uint32_t lc_context_of(const lc_gguf_shape *s, const llmr_engine_load_params *p)
{
    uint32_t train = s->context_train ? s->context_train : LC_DEFAULT_CONTEXT;
    if (p->context_length)
        return p->context_length < train ? p->context_length : train;
    return train < LC_DEFAULT_CONTEXT ? train : LC_DEFAULT_CONTEXT;
}

uint32_t lc_max_batch_of(const llmr_engine_load_params *p, bool gpu)
{
    if (p->max_batch)
        return p->max_batch;
    /* On the CPU each context computes with every core: two at once only contend. */
    return gpu ? 4 : 1;
}

uint64_t lc_context_bytes(const lc_gguf_shape *s, uint32_t n_ctx, uint32_t n_batch)
{
    /* KV cache: every layer, the whole context, K and V at f16 (an upper bound: a
     * sliding-window layer keeps less). */
    uint64_t kv = (uint64_t)s->n_layer * n_ctx * s->n_head_kv *
                  ((uint64_t)s->key_length + s->value_length) * 2u;
    /* Compute buffers: activations of a micro-batch (llama.cpp computes n_batch
     * tokens in micro-batches of at most 512) through the widest layer and to the
     * logits, and its attention scores against the context: an upper bound. */
    uint64_t ubatch = n_batch < 512 ? n_batch : 512;
    uint64_t act = ubatch * ((uint64_t)s->n_embd * 16u + (uint64_t)s->vocab_size) * 4u;
    uint64_t scores = ubatch * n_ctx * (s->n_head ? s->n_head : 1) * 4u / 8u;
    return kv + act + scores + (32u << 20);
}
