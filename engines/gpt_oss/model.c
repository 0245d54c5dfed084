/* Binding a gpt-oss model to its mapped tensors: see model.h. */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif
#include "model.h"

#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ERR_MAX 512

static void fail(char *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void fail(char *err, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, ERR_MAX, fmt, ap);
    va_end(ap);
}

/* ---- config ---------------------------------------------------------------------- */

static bool get_u32(const json_t *o, const char *key, uint32_t *out, char *err)
{
    const json_t *v = json_object_get(o, key);
    if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > INT32_MAX) {
        fail(err, "the checked config has no whole number %s", key);
        return false;
    }
    *out = (uint32_t)json_integer_value(v);
    return true;
}

static bool get_f64(const json_t *o, const char *key, double *out, char *err)
{
    const json_t *v = json_object_get(o, key);
    if (!json_is_number(v)) {
        fail(err, "the checked config has no number %s", key);
        return false;
    }
    *out = json_number_value(v);
    return true;
}

/* EOS ids: generation_config.json's eos_token_id (a number or a list), else the
 * checked config's; and gpt-oss's <|return|> and <|call|>. */
static void read_eos(gpt_config *c, const char *dir, const json_t *checked)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/generation_config.json", dir);
    json_t *gen = json_load_file(path, 0, NULL);
    const json_t *ids = json_object_get(gen, "eos_token_id");
    if (!ids)
        ids = json_object_get(checked, "eos_token_ids");
    c->n_eos = 0;
    if (json_is_integer(ids)) {
        c->eos[c->n_eos++] = (int32_t)json_integer_value(ids);
    } else {
        size_t i;
        const json_t *v;
        json_array_foreach(ids, i, v)
        {
            if (json_is_integer(v) && c->n_eos < GPT_MAX_EOS - 2) /* room for the turn ends */
                c->eos[c->n_eos++] = (int32_t)json_integer_value(v);
        }
    }
    json_decref(gen);
    /* A gpt-oss turn ends at <|return|> or <|call|> whatever generation_config says. */
    static const int32_t turn_ends[] = {200002, 200012};
    for (size_t i = 0; i < 2; i++) {
        bool have = false;
        for (uint32_t j = 0; j < c->n_eos; j++)
            have |= c->eos[j] == turn_ends[i];
        if (!have && (uint32_t)turn_ends[i] < c->vocab && c->n_eos < GPT_MAX_EOS)
            c->eos[c->n_eos++] = turn_ends[i];
    }
}

llmr_status gpt_config_read(gpt_config *c, const llmr_engine_model_desc *desc, char *err)
{
    memset(c, 0, sizeof *c);
    json_t *o = desc->checked_config_json ? json_loads(desc->checked_config_json, 0, NULL) : NULL;
    if (!json_is_object(o)) {
        json_decref(o);
        fail(err, "model %s has no checked config (is it a gpt_oss model?)", desc->name);
        return LLMR_MODEL_CORRUPT;
    }
    bool ok = get_u32(o, "hidden_size", &c->hidden, err) &&
              get_u32(o, "num_hidden_layers", &c->layers, err) &&
              get_u32(o, "num_attention_heads", &c->heads, err) &&
              get_u32(o, "num_key_value_heads", &c->kv_heads, err) &&
              get_u32(o, "head_dim", &c->head_dim, err) && get_u32(o, "vocab_size", &c->vocab, err) &&
              get_u32(o, "num_local_experts", &c->experts, err) &&
              get_u32(o, "num_experts_per_tok", &c->top_k, err) &&
              get_u32(o, "intermediate_size", &c->inter, err) &&
              get_u32(o, "sliding_window", &c->window, err) &&
              get_u32(o, "max_position_embeddings", &c->max_position, err) &&
              get_f64(o, "rope_theta", &c->theta, err) && get_f64(o, "rms_norm_eps", &c->eps, err) &&
              get_f64(o, "swiglu_limit", &c->swiglu_limit, err);
    const json_t *y = json_object_get(o, "rope_scaling");
    if (ok && y) {
        uint32_t orig = 0;
        c->has_yarn = true;
        ok = get_f64(y, "factor", &c->yarn.factor, err) &&
             get_f64(y, "beta_fast", &c->yarn.beta_fast, err) &&
             get_f64(y, "beta_slow", &c->yarn.beta_slow, err) &&
             get_u32(y, "original_max_position_embeddings", &orig, err);
        c->yarn.original_max_position = orig;
        c->yarn.truncate = json_is_true(json_object_get(y, "truncate"));
    }
    const json_t *types = json_object_get(o, "layer_types");
    if (ok && (json_array_size(types) != c->layers || c->layers > 256)) {
        fail(err, "layer_types lists %zu layers for %u", json_array_size(types), c->layers);
        ok = false;
    }
    for (uint32_t i = 0; ok && i < c->layers; i++)
        c->sliding[i] =
            strcmp(json_string_value(json_array_get(types, i)) ? json_string_value(json_array_get(types, i))
                                                                : "",
                   "sliding_attention") == 0;
    if (ok && (c->heads % c->kv_heads || c->head_dim % 2 || c->hidden % 32 || c->inter % 32 ||
               c->top_k == 0 || c->top_k > c->experts || c->top_k > 64 || c->head_dim > 512)) {
        fail(err, "the config's shapes are not ones the gpt-oss engine runs (heads %u, kv heads "
                  "%u, head_dim %u, hidden %u, intermediate %u, top-k %u of %u experts)",
             c->heads, c->kv_heads, c->head_dim, c->hidden, c->inter, c->top_k, c->experts);
        json_decref(o);
        return LLMR_UNSUPPORTED;
    }
    if (ok)
        read_eos(c, desc->dir, o);
    json_decref(o);
    return ok ? LLMR_OK : LLMR_MODEL_CORRUPT;
}

/* ---- tensors --------------------------------------------------------------------- */

static const llmr_engine_tensor *find(const llmr_engine_model_desc *d, const char *name)
{
    for (size_t i = 0; i < d->tensor_count; i++)
        if (strcmp(llmr_engine_desc_tensor(d, i)->name, name) == 0)
            return llmr_engine_desc_tensor(d, i);
    return NULL;
}

static bool float_dtype(const char *s, gpt_dtype *out)
{
    if (strcmp(s, "BF16") == 0)
        *out = GPT_DT_BF16;
    else if (strcmp(s, "F16") == 0)
        *out = GPT_DT_F16;
    else if (strcmp(s, "F32") == 0)
        *out = GPT_DT_F32;
    else
        return false;
    return true;
}

typedef struct binder {
    const llmr_engine_model_desc *d;
    char *err;
    bool ok;
} binder;

static const llmr_engine_tensor *tensor(binder *b, const char *fmt, uint32_t layer)
{
    char name[256];
    snprintf(name, sizeof name, fmt, layer);
    const llmr_engine_tensor *t = b->ok ? find(b->d, name) : NULL;
    if (b->ok && !t) {
        fail(b->err, "tensor %s is missing", name);
        b->ok = false;
    }
    return t;
}

static void matrix(binder *b, gpt_matrix *m, const char *fmt, uint32_t layer, uint32_t rows,
                   uint32_t cols)
{
    const llmr_engine_tensor *t = tensor(b, fmt, layer);
    if (!t)
        return;
    if (t->rank != 2 || t->shape[0] != rows || t->shape[1] != cols ||
        !float_dtype(t->dtype, &m->dtype)) {
        fail(b->err, "tensor %s is %s of rank %u, not a %u x %u float matrix", t->name, t->dtype,
             t->rank, rows, cols);
        b->ok = false;
        return;
    }
    m->data = t->data;
    m->rows = rows;
    m->cols = cols;
}

/* A vector (or a stack of them) decoded to fp32, n values in all. */
static float *vector(binder *b, const char *fmt, uint32_t layer, uint64_t n)
{
    const llmr_engine_tensor *t = tensor(b, fmt, layer);
    gpt_dtype dt;
    if (!t)
        return NULL;
    uint64_t count = 1;
    for (uint32_t i = 0; i < t->rank; i++)
        count *= t->shape[i];
    if (count != n || !float_dtype(t->dtype, &dt)) {
        fail(b->err, "tensor %s is %s with %llu values, not %llu floats", t->name, t->dtype,
             (unsigned long long)count, (unsigned long long)n);
        b->ok = false;
        return NULL;
    }
    float *v = malloc(n * sizeof *v);
    if (!v) {
        fail(b->err, "out of memory decoding %s", t->name);
        b->ok = false;
        return NULL;
    }
    gpt_decode(t->data, dt, 0, n, v);
    return v;
}

/* Experts of one MXFP4 projection: [E][rows][cols]. */
static gpt_mxfp4 *experts(binder *b, const char *name, uint32_t layer, uint32_t n_experts,
                          uint32_t rows, uint32_t cols)
{
    char fmt[128];
    snprintf(fmt, sizeof fmt, "model.layers.%%u.mlp.experts.%s_blocks", name);
    const llmr_engine_tensor *bl = tensor(b, fmt, layer);
    snprintf(fmt, sizeof fmt, "model.layers.%%u.mlp.experts.%s_scales", name);
    const llmr_engine_tensor *sc = tensor(b, fmt, layer);
    if (!bl || !sc)
        return NULL;
    if (strcmp(bl->dtype, "U8") || strcmp(sc->dtype, "U8") || bl->rank != 4 || sc->rank != 3 ||
        bl->shape[0] != n_experts || bl->shape[1] != rows || bl->shape[2] != cols / 32 ||
        bl->shape[3] != 16 || sc->shape[0] != n_experts || sc->shape[1] != rows ||
        sc->shape[2] != cols / 32) {
        fail(b->err, "tensors %s and %s are not MXFP4 experts of [%u, %u, %u]", bl->name,
             sc->name, n_experts, rows, cols);
        b->ok = false;
        return NULL;
    }
    gpt_mxfp4 *e = calloc(n_experts, sizeof *e);
    if (!e) {
        fail(b->err, "out of memory");
        b->ok = false;
        return NULL;
    }
    size_t block_bytes = (size_t)rows * cols / 2, scale_bytes = (size_t)rows * (cols / 32);
    for (uint32_t i = 0; i < n_experts; i++) {
        e[i].blocks = (const uint8_t *)bl->data + i * block_bytes;
        e[i].scales = (const uint8_t *)sc->data + i * scale_bytes;
        e[i].rows = rows;
        e[i].cols = cols;
    }
    return e;
}

llmr_status gpt_model_bind(gpt_model *m, const llmr_engine_model_desc *desc, unsigned threads,
                           char *err)
{
    memset(m, 0, sizeof *m);
    llmr_status st = gpt_config_read(&m->cfg, desc, err);
    if (st != LLMR_OK)
        return st;
    const gpt_config *c = &m->cfg;
    uint32_t q = c->heads * c->head_dim, kv = c->kv_heads * c->head_dim;
    binder b = {desc, err, true};
    m->layers = calloc(c->layers, sizeof *m->layers);
    if (!m->layers) {
        fail(err, "out of memory");
        return LLMR_OOM_RAM;
    }
    matrix(&b, &m->embed, "model.embed_tokens.weight", 0, c->vocab, c->hidden);
    matrix(&b, &m->lm_head, "lm_head.weight", 0, c->vocab, c->hidden);
    m->final_norm = vector(&b, "model.norm.weight", 0, c->hidden);
    for (uint32_t i = 0; b.ok && i < c->layers; i++) {
        gpt_layer *L = &m->layers[i];
        L->attn_norm = vector(&b, "model.layers.%u.input_layernorm.weight", i, c->hidden);
        L->mlp_norm = vector(&b, "model.layers.%u.post_attention_layernorm.weight", i, c->hidden);
        matrix(&b, &L->q, "model.layers.%u.self_attn.q_proj.weight", i, q, c->hidden);
        matrix(&b, &L->k, "model.layers.%u.self_attn.k_proj.weight", i, kv, c->hidden);
        matrix(&b, &L->v, "model.layers.%u.self_attn.v_proj.weight", i, kv, c->hidden);
        matrix(&b, &L->o, "model.layers.%u.self_attn.o_proj.weight", i, c->hidden, q);
        L->q_bias = vector(&b, "model.layers.%u.self_attn.q_proj.bias", i, q);
        L->k_bias = vector(&b, "model.layers.%u.self_attn.k_proj.bias", i, kv);
        L->v_bias = vector(&b, "model.layers.%u.self_attn.v_proj.bias", i, kv);
        L->o_bias = vector(&b, "model.layers.%u.self_attn.o_proj.bias", i, c->hidden);
        L->sinks = vector(&b, "model.layers.%u.self_attn.sinks", i, c->heads);
        matrix(&b, &L->router, "model.layers.%u.mlp.router.weight", i, c->experts, c->hidden);
        L->router_bias = vector(&b, "model.layers.%u.mlp.router.bias", i, c->experts);
        L->gate_up = experts(&b, "gate_up_proj", i, c->experts, 2 * c->inter, c->hidden);
        L->down = experts(&b, "down_proj", i, c->experts, c->hidden, c->inter);
        L->gate_up_bias = vector(&b, "model.layers.%u.mlp.experts.gate_up_proj_bias", i,
                                 (uint64_t)c->experts * 2 * c->inter);
        L->down_bias = vector(&b, "model.layers.%u.mlp.experts.down_proj_bias", i,
                              (uint64_t)c->experts * c->hidden);
    }
    if (b.ok && !gpt_rope_init(&m->rope, c->head_dim, c->theta, c->has_yarn ? &c->yarn : NULL)) {
        fail(err, "out of memory");
        b.ok = false;
    }
    if (b.ok && !(m->pool = gpt_pool_create(threads))) {
        fail(err, "cannot start the CPU threads");
        b.ok = false;
    }
    if (!b.ok) {
        gpt_model_free(m);
        return strstr(err, "out of memory") || strstr(err, "threads") ? LLMR_OOM_RAM
                                                                        : LLMR_MODEL_CORRUPT;
    }
    return LLMR_OK;
}

void gpt_model_free(gpt_model *m)
{
    for (uint32_t i = 0; m->layers && i < m->cfg.layers; i++) {
        gpt_layer *L = &m->layers[i];
        free(L->attn_norm);
        free(L->mlp_norm);
        free(L->q_bias);
        free(L->k_bias);
        free(L->v_bias);
        free(L->o_bias);
        free(L->sinks);
        free(L->router_bias);
        free(L->gate_up);
        free(L->down);
        free(L->gate_up_bias);
        free(L->down_bias);
    }
    free(m->layers);
    free(m->final_norm);
    gpt_rope_free(&m->rope);
    gpt_pool_free(m->pool);
    memset(m, 0, sizeof *m);
}

uint64_t gpt_model_ram_estimate(const gpt_config *c, uint32_t context, uint32_t batch)
{
    uint64_t kv_per_token = 2ull * c->kv_heads * c->head_dim * sizeof(float);
    uint64_t kv = 0;
    for (uint32_t i = 0; i < c->layers; i++)
        kv += kv_per_token * (c->sliding[i] && c->window < context ? c->window : context);
    /* decoded small vectors, the logits and a prefill chunk's activations */
    uint64_t small = (uint64_t)c->layers * c->experts * (3ull * c->hidden + 2ull * c->inter) * 4;
    uint64_t scratch = (uint64_t)c->vocab * 4 * 2 + 256ull * (6ull * c->inter + 8ull * c->hidden) * 4;
    return kv * batch + small + scratch * batch;
}
