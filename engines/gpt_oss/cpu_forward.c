/* The gpt-oss forward pass on the CPU: see cpu_forward.h. */
#include "cpu_forward.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define SWIGLU_ALPHA 1.702f

/* ---- the cache -------------------------------------------------------------------- */

static void *cache_alloc(const gpt_state *s, size_t n)
{
    return s->host ? s->host->alloc(s->host->ctx, n) : malloc(n);
}

static void cache_free(const gpt_state *s, void *p)
{
    if (s->host)
        s->host->free(s->host->ctx, p);
    else
        free(p);
}

/* The layer's cache for `cap` positions, keeping the first `keep` of the old one. */
static bool layer_resize(gpt_state *s, gpt_kv_layer *L, uint32_t cap, uint32_t keep)
{
    const gpt_config *c = &s->m->cfg;
    size_t row = (size_t)c->head_dim * sizeof(float), bytes = (size_t)c->kv_heads * cap * row;
    float *k = cache_alloc(s, bytes), *v = cache_alloc(s, bytes);
    if (!k || !v) {
        if (k)
            cache_free(s, k);
        if (v)
            cache_free(s, v);
        return false;
    }
    for (uint32_t h = 0; keep && h < c->kv_heads; h++) {
        memcpy(k + (size_t)h * cap * c->head_dim, L->k + (size_t)h * L->cap * c->head_dim,
               keep * row);
        memcpy(v + (size_t)h * cap * c->head_dim, L->v + (size_t)h * L->cap * c->head_dim,
               keep * row);
    }
    if (L->k) {
        cache_free(s, L->k);
        cache_free(s, L->v);
        s->bytes -= 2 * (size_t)c->kv_heads * L->cap * row;
    }
    L->k = k;
    L->v = v;
    L->cap = cap;
    s->bytes += 2 * bytes;
    return true;
}

llmr_status gpt_state_init(gpt_state *s, const gpt_model *m, uint32_t max_tokens,
                           uint32_t initial, const llmr_host_api *host)
{
    memset(s, 0, sizeof *s);
    s->m = m;
    s->host = host;
    s->max_tokens = max_tokens;
    const gpt_config *c = &m->cfg;
    s->kv = calloc(c->layers, sizeof *s->kv);
    if (!s->kv)
        return LLMR_OOM_RAM;
    if (initial > max_tokens)
        initial = max_tokens;
    for (uint32_t i = 0; i < c->layers; i++) {
        gpt_kv_layer *L = &s->kv[i];
        uint32_t ring_cap = c->window + GPT_CHUNK;
        L->ring = c->sliding[i] && c->window && ring_cap < max_tokens;
        if (!layer_resize(s, L, L->ring ? ring_cap : initial, 0)) {
            gpt_state_free(s);
            return LLMR_OOM_RAM;
        }
    }
    return LLMR_OK;
}

/* Room for `need` positions in every growing layer (doubling). */
static bool ensure_room(gpt_state *s, uint32_t need)
{
    for (uint32_t i = 0; i < s->m->cfg.layers; i++) {
        gpt_kv_layer *L = &s->kv[i];
        if (L->ring || L->cap >= need)
            continue;
        uint32_t cap = L->cap * 2 > need ? L->cap * 2 : need;
        if (cap > s->max_tokens)
            cap = s->max_tokens;
        if (!layer_resize(s, L, cap, s->pos))
            return false;
    }
    return true;
}

void gpt_state_free(gpt_state *s)
{
    for (uint32_t i = 0; s->kv && i < s->m->cfg.layers; i++) {
        if (s->kv[i].k)
            cache_free(s, s->kv[i].k);
        if (s->kv[i].v)
            cache_free(s, s->kv[i].v);
    }
    free(s->kv);
    s->kv = NULL;
    s->bytes = 0;
}

/* ---- attention --------------------------------------------------------------------- */

typedef struct attn_job {
    const gpt_model *m;
    const gpt_kv_layer *kv;
    const float *q;   /* [T][heads * hd] */
    float *out;       /* [T][heads * hd] */
    const float *sinks;
    uint32_t T, first_pos;
    bool sliding;
} attn_job;

static void attend(void *ctx, size_t begin, size_t end)
{
    const attn_job *j = ctx;
    const gpt_config *c = &j->m->cfg;
    uint32_t hd = c->head_dim, group = c->heads / c->kv_heads;
    float scale = 1.0f / sqrtf((float)hd);
    float acc[512];
    for (size_t task = begin; task < end; task++) {
        uint32_t t = (uint32_t)(task / c->heads), h = (uint32_t)(task % c->heads);
        uint32_t pos = j->first_pos + t, kvh = h / group;
        uint32_t start = j->sliding && pos + 1 > c->window ? pos + 1 - c->window : 0;
        const float *q = j->q + (size_t)t * c->heads * hd + (size_t)h * hd;
        const float *kbase = j->kv->k + (size_t)kvh * j->kv->cap * hd;
        const float *vbase = j->kv->v + (size_t)kvh * j->kv->cap * hd;
        gpt_attn a;
        gpt_attn_begin(&a, acc, hd, j->sinks[h]);
        uint32_t n = pos + 1 - start;
        uint32_t slot = j->kv->ring ? start % j->kv->cap : start;
        while (n) { /* at most two runs: the ring may wrap */
            uint32_t run = j->kv->cap - slot < n ? j->kv->cap - slot : n;
            gpt_attn_keys(&a, q, kbase + (size_t)slot * hd, vbase + (size_t)slot * hd, run, scale);
            n -= run;
            slot = 0;
        }
        gpt_attn_end(&a, j->out + (size_t)t * c->heads * hd + (size_t)h * hd);
    }
}

/* ---- the experts --------------------------------------------------------------------- */

typedef struct moe_scratch {
    uint32_t *idx;   /* [T][top_k] */
    float *weight;   /* [T][top_k] */
    uint32_t *rows;  /* tokens routed to one expert */
    float *xs;       /* [T][hidden]: their inputs */
    float *gu;       /* [T][2 inter] */
    float *act;      /* [T][inter] */
    float *down;     /* [T][hidden] */
    float *wrow;     /* [T] weights of those tokens */
} moe_scratch;

static void moe(const gpt_model *m, const gpt_layer *L, const float *xn, float *x, uint32_t T,
                float *router_logits, moe_scratch *s)
{
    const gpt_config *c = &m->cfg;
    gpt_linear(m->pool, router_logits, xn, T, &L->router, L->router_bias);
    for (uint32_t t = 0; t < T; t++)
        gpt_router_topk(router_logits + (size_t)t * c->experts, c->experts, c->top_k,
                        s->idx + (size_t)t * c->top_k, s->weight + (size_t)t * c->top_k);
    for (uint32_t e = 0; e < c->experts; e++) {
        uint32_t n = 0;
        for (uint32_t t = 0; t < T; t++)
            for (uint32_t k = 0; k < c->top_k; k++)
                if (s->idx[(size_t)t * c->top_k + k] == e) {
                    s->rows[n] = t;
                    s->wrow[n] = s->weight[(size_t)t * c->top_k + k];
                    memcpy(s->xs + (size_t)n * c->hidden, xn + (size_t)t * c->hidden,
                           c->hidden * sizeof(float));
                    n++;
                }
        if (n == 0)
            continue;
        gpt_linear_mxfp4(m->pool, s->gu, s->xs, n, &L->gate_up[e],
                         L->gate_up_bias + (size_t)e * 2 * c->inter);
        for (uint32_t r = 0; r < n; r++)
            gpt_swiglu(s->act + (size_t)r * c->inter, s->gu + (size_t)r * 2 * c->inter, c->inter,
                       SWIGLU_ALPHA, (float)c->swiglu_limit);
        gpt_linear_mxfp4(m->pool, s->down, s->act, n, &L->down[e],
                         L->down_bias + (size_t)e * c->hidden);
        for (uint32_t r = 0; r < n; r++) {
            float *xr = x + (size_t)s->rows[r] * c->hidden;
            const float *d = s->down + (size_t)r * c->hidden;
            for (uint32_t i = 0; i < c->hidden; i++)
                xr[i] += s->wrow[r] * d[i];
        }
    }
}

/* ---- one chunk ----------------------------------------------------------------------- */

typedef struct buffers {
    float *x, *xn, *q, *k, *v, *attn, *o, *router;
    moe_scratch moe;
    float *block;
} buffers;

static void buffers_free(buffers *b)
{
    free(b->block);
    memset(b, 0, sizeof *b);
}

static bool buffers_init(buffers *b, const gpt_config *c, uint32_t T)
{
    size_t q = (size_t)c->heads * c->head_dim, kv = (size_t)c->kv_heads * c->head_dim;
    size_t sizes[] = {T * (size_t)c->hidden,    T * (size_t)c->hidden, T * q,
                      T * kv,                   T * kv,                T * q,
                      T * (size_t)c->hidden,    T * (size_t)c->experts, T * (size_t)c->top_k,
                      T * (size_t)c->top_k,     T,                     T * (size_t)c->hidden,
                      T * 2 * (size_t)c->inter, T * (size_t)c->inter,  T * (size_t)c->hidden,
                      T};
    size_t total = 0;
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
        total += sizes[i];
    b->block = malloc(total * sizeof(float));
    if (!b->block)
        return false;
    float *p = b->block;
    float **floats[] = {&b->x, &b->xn, &b->q, &b->k, &b->v, &b->attn, &b->o, &b->router};
    size_t i = 0;
    for (; i < 8; i++) {
        *floats[i] = p;
        p += sizes[i];
    }
    b->moe.idx = (uint32_t *)p;
    p += sizes[i++];
    b->moe.weight = p;
    p += sizes[i++];
    b->moe.rows = (uint32_t *)p;
    p += sizes[i++];
    b->moe.xs = p;
    p += sizes[i++];
    b->moe.gu = p;
    p += sizes[i++];
    b->moe.act = p;
    p += sizes[i++];
    b->moe.down = p;
    p += sizes[i++];
    b->moe.wrow = p;
    return true;
}

static void write_kv(gpt_kv_layer *kv, const gpt_config *c, const float *k, const float *v,
                     uint32_t T, uint32_t first_pos)
{
    uint32_t hd = c->head_dim;
    for (uint32_t t = 0; t < T; t++) {
        uint32_t pos = first_pos + t, slot = kv->ring ? pos % kv->cap : pos;
        for (uint32_t h = 0; h < c->kv_heads; h++) {
            size_t at = ((size_t)h * kv->cap + slot) * hd;
            memcpy(kv->k + at, k + ((size_t)t * c->kv_heads + h) * hd, hd * sizeof(float));
            memcpy(kv->v + at, v + ((size_t)t * c->kv_heads + h) * hd, hd * sizeof(float));
        }
    }
}

static void run_chunk(gpt_state *s, buffers *b, const int32_t *ids, uint32_t T, float *logits,
                      uint32_t logits_from)
{
    const gpt_model *m = s->m;
    const gpt_config *c = &m->cfg;
    uint32_t qw = c->heads * c->head_dim, kvw = c->kv_heads * c->head_dim;
    for (uint32_t t = 0; t < T; t++)
        gpt_decode(m->embed.data, m->embed.dtype, (size_t)ids[t] * c->hidden, c->hidden,
                   b->x + (size_t)t * c->hidden);
    for (uint32_t l = 0; l < c->layers; l++) {
        const gpt_layer *L = &m->layers[l];
        for (uint32_t t = 0; t < T; t++)
            gpt_rmsnorm(b->xn + (size_t)t * c->hidden, b->x + (size_t)t * c->hidden, L->attn_norm,
                        c->hidden, (float)c->eps);
        gpt_linear(m->pool, b->q, b->xn, T, &L->q, L->q_bias);
        gpt_linear(m->pool, b->k, b->xn, T, &L->k, L->k_bias);
        gpt_linear(m->pool, b->v, b->xn, T, &L->v, L->v_bias);
        for (uint32_t t = 0; t < T; t++) {
            gpt_rope_apply(&m->rope, b->q + (size_t)t * qw, c->heads, c->head_dim, s->pos + t);
            gpt_rope_apply(&m->rope, b->k + (size_t)t * kvw, c->kv_heads, c->head_dim, s->pos + t);
        }
        write_kv(&s->kv[l], c, b->k, b->v, T, s->pos);
        attn_job aj = {m, &s->kv[l], b->q, b->attn, L->sinks, T, s->pos, c->sliding[l]};
        gpt_pool_for(m->pool, (size_t)T * c->heads, attend, &aj);
        gpt_linear(m->pool, b->o, b->attn, T, &L->o, L->o_bias);
        for (size_t i = 0; i < (size_t)T * c->hidden; i++)
            b->x[i] += b->o[i];
        for (uint32_t t = 0; t < T; t++)
            gpt_rmsnorm(b->xn + (size_t)t * c->hidden, b->x + (size_t)t * c->hidden, L->mlp_norm,
                        c->hidden, (float)c->eps);
        moe(m, L, b->xn, b->x, T, b->router, &b->moe);
    }
    s->pos += T;
    if (!logits || logits_from >= T)
        return;
    uint32_t n = T - logits_from;
    for (uint32_t t = 0; t < n; t++)
        gpt_rmsnorm(b->xn + (size_t)t * c->hidden, b->x + (size_t)(logits_from + t) * c->hidden,
                    m->final_norm, c->hidden, (float)c->eps);
    gpt_linear(m->pool, logits, b->xn, n, &m->lm_head, NULL);
}

llmr_status gpt_forward(gpt_state *s, const int32_t *ids, uint32_t n, float *logits,
                        uint32_t n_logits)
{
    const gpt_config *c = &s->m->cfg;
    if (n == 0 || n_logits > n)
        return LLMR_INTERNAL;
    if ((uint64_t)s->pos + n > s->max_tokens)
        return LLMR_UNSUPPORTED;
    if (!ensure_room(s, s->pos + n))
        return LLMR_OOM_RAM;
    for (uint32_t i = 0; i < n; i++)
        if (ids[i] < 0 || (uint32_t)ids[i] >= c->vocab)
            return LLMR_UNSUPPORTED;
    buffers b;
    if (!buffers_init(&b, c, n < GPT_CHUNK ? n : GPT_CHUNK))
        return LLMR_OOM_RAM;
    uint32_t want_from = n - n_logits; /* index of the first token whose logits are wanted */
    for (uint32_t done = 0; done < n;) {
        uint32_t T = n - done < GPT_CHUNK ? n - done : GPT_CHUNK;
        uint32_t from = want_from > done ? want_from - done : 0; /* within this chunk */
        float *out = NULL;
        if (logits && n_logits && from < T)
            out = logits + (size_t)(done + from - want_from) * c->vocab;
        run_chunk(s, &b, ids + done, T, out, from);
        done += T;
    }
    buffers_free(&b);
    return LLMR_OK;
}
