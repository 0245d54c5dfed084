/* Running sequences on the gpt-oss CUDA path: the prefill of a prompt in chunks (tensor
 * core GEMMs, experts grouped on the GPU, flash attention over the chunk and the
 * cache), the pick of the next token on the GPU, and the decode step as one CUDA graph
 * (GEMVs, RoPE writing the cache, split attention, the routed experts, lm_head, the
 * pick).  See gpt_cuda.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpt_cuda_impl.cuh"

#define CK(call) \
    do { \
        cudaError_t e_ = (call); \
        if (e_ != cudaSuccess) \
            return e_; \
    } while (0)

static uint32_t qkv_width(const gpt_config *c)
{
    return (c->heads + 2 * c->kv_heads) * c->head_dim;
}

/* Makes s the sequence whose state the kernels read (the graph's state block). */
static cudaError_t activate(gpt_cuda *g, gpt_cuda_seq *s)
{
    if (g->active == s)
        return cudaSuccess;
    size_t n = state_block_bytes(&g->cfg);
    if (g->active)
        CK(cudaMemcpyAsync(g->active->d_block, g->d_cur, n, cudaMemcpyDeviceToDevice, g->stream));
    CK(cudaMemcpyAsync(g->d_cur, s->d_block, n, cudaMemcpyDeviceToDevice, g->stream));
    g->active = s;
    return cudaSuccess;
}

/* ---- sequences ----------------------------------------------------------------------- */

llmr_status gpt_cuda_seq_open(gpt_cuda *g, uint32_t max_tokens, gpt_cuda_seq **out, char *err)
{
    *out = NULL;
    const gpt_config *c = &g->cfg;
    if (max_tokens == 0 || max_tokens > g->context) {
        snprintf(err, 512, "a sequence of %u positions: this model holds 1 to %u", max_tokens,
                 g->context);
        return LLMR_UNSUPPORTED;
    }
    gpt_cuda_seq *s = (gpt_cuda_seq *)calloc(1, sizeof *s);
    if (!s) {
        snprintf(err, 512, "out of memory");
        return LLMR_OOM_RAM;
    }
    s->g = g;
    s->max_tokens = max_tokens;
    s->bytes = gpt_cuda_seq_bytes_for(c, max_tokens);
    pthread_mutex_lock(&g->lock);
    if (!gpt_kv_pool_alloc(&g->ranges, s->bytes, &s->off)) {
        snprintf(err, 512,
                 "the KV pool (%llu MiB, %llu MiB in use) has no room for %llu MiB more: "
                 "wait for a request to end or ask for fewer tokens",
                 (unsigned long long)(g->ranges.size >> 20),
                 (unsigned long long)(g->ranges.in_use >> 20),
                 (unsigned long long)(s->bytes >> 20));
        pthread_mutex_unlock(&g->lock);
        free(s);
        return LLMR_OOM_VRAM;
    }
    /* the state block, then each layer's K and V */
    size_t n = state_block_bytes(c);
    unsigned char *host = (unsigned char *)calloc(1, n);
    uint8_t *base = g->pool + s->off, *at = base + ((n + 255) & ~(size_t)255);
    s->d_block = base;
    KvView *kv = reinterpret_cast<KvView *>(host + sizeof(SeqState));
    for (uint32_t l = 0; host && l < c->layers; l++) {
        bool ring = g->layers[l].window && g->layers[l].window < max_tokens;
        uint32_t cap = ring ? g->layers[l].window : max_tokens;
        size_t bytes = ((size_t)cap * c->kv_heads * c->head_dim * sizeof(float) + 255) & ~(size_t)255;
        kv[l].k = reinterpret_cast<float *>(at);
        kv[l].v = reinterpret_cast<float *>(at + bytes);
        kv[l].cap = cap;
        kv[l].ring = ring;
        at += 2 * bytes;
    }
    cudaError_t e = host ? cudaSetDevice(g->device) : cudaErrorMemoryAllocation;
    if (e == cudaSuccess)
        e = cudaMemcpyAsync(s->d_block, host, n, cudaMemcpyHostToDevice, g->stream);
    if (e == cudaSuccess)
        e = cudaStreamSynchronize(g->stream);
    free(host);
    if (e != cudaSuccess) {
        gpt_kv_pool_release(&g->ranges, s->off);
        pthread_mutex_unlock(&g->lock);
        free(s);
        return gpt_cuda_fail(err, "setting up a sequence", e);
    }
    pthread_mutex_unlock(&g->lock);
    *out = s;
    return LLMR_OK;
}

void gpt_cuda_seq_close(gpt_cuda_seq *s)
{
    if (!s)
        return;
    gpt_cuda *g = s->g;
    pthread_mutex_lock(&g->lock);
    if (g->active == s)
        g->active = NULL;
    gpt_kv_pool_release(&g->ranges, s->off);
    pthread_mutex_unlock(&g->lock);
    free(s);
}

uint64_t gpt_cuda_seq_bytes(const gpt_cuda_seq *s)
{
    return s->bytes;
}

uint32_t gpt_cuda_seq_pos(const gpt_cuda_seq *s)
{
    return s->pos;
}

/* ---- prefill --------------------------------------------------------------------------- */

/* T tokens (already in pf.ids) at positions pos0.. through every layer; x ends as the
 * last hidden states. */
static cudaError_t run_chunk(gpt_cuda *g, uint32_t T, uint32_t pos0)
{
    const gpt_config *c = &g->cfg;
    PrefillBuf *p = &g->pf;
    cudaStream_t st = g->stream;
    uint32_t H = c->hidden, QW = c->heads * c->head_dim, k = c->top_k, E = c->experts;
    float eps = (float)c->eps, limit = (float)c->swiglu_limit;
    CK(k_embed(p->x, g->embed, p->ids, T, H, st));
    for (uint32_t l = 0; l < c->layers; l++) {
        const DevLayer *L = &g->layers[l];
        const KvView *kv = cur_kv(g) + l;
        CK(k_rmsnorm(p->xn, p->xn_lo, NULL, p->x, L->attn_norm, T, H, eps, st));
        CK(k_gemm_f16(p->qkv, p->xn, p->xn_lo, L->wqkv, L->bqkv, T, qkv_width(c), H, 0,
                      p->gemm_parts, st));
        CK(k_rope(p->qkv, NULL, g->cos_sin, NULL, pos0, T, c->heads, c->kv_heads, c->head_dim,
                  st));
        CK(k_attention_prefill(p->attn, p->attn_lo, p->qkv, kv, L->sinks, pos0, T, c->heads,
                               c->kv_heads, c->head_dim, L->window, st));
        CK(k_kv_store(kv, p->qkv, pos0, T, c->heads, c->kv_heads, c->head_dim, st));
        CK(k_gemm_f16(p->x, p->attn, p->attn_lo, L->wo, L->bo, T, H, QW, 1, p->gemm_parts, st));
        CK(k_rmsnorm(p->xn, NULL, p->xf, p->x, L->mlp_norm, T, H, eps, st));
        CK(k_router(p->eids, p->ew, p->xf, L->wr, L->br, T, H, E, k, st));
        CK(k_moe_group(p->rows, p->slot_of, p->counts, p->offsets, p->eids, T, k, E, st));
        CK(k_gemm_mxfp4_grouped(NULL, p->act, p->xn, p->rows, L->gu_blocks, L->gu_scales,
                                L->gu_bias, p->offsets, E, T, 2 * c->inter, H, SWIGLU_ALPHA,
                                limit, st));
        CK(k_gemm_mxfp4_grouped(p->moe_out, NULL, p->act, NULL, L->dn_blocks, L->dn_scales,
                                L->dn_bias, p->offsets, E, T, H, c->inter, SWIGLU_ALPHA, limit,
                                st));
        CK(k_moe_combine(p->x, p->moe_out, p->slot_of, p->ew, T, k, H, st));
    }
    return cudaSuccess;
}

/* Logits of chunk rows [from, T): the final norm and lm_head, GPT_CUDA_LOGIT_ROWS at a
 * time.  Rows at or past `copy_from` go to host (row r to host + (r - copy_from) rows).
 * pick_src ends at the last row's logits. */
static cudaError_t chunk_logits(gpt_cuda *g, uint32_t from, uint32_t T, float *host,
                                uint32_t copy_from)
{
    const gpt_config *c = &g->cfg;
    PrefillBuf *p = &g->pf;
    for (uint32_t r = from; r < T; r += GPT_CUDA_LOGIT_ROWS) {
        uint32_t rows = T - r < GPT_CUDA_LOGIT_ROWS ? T - r : GPT_CUDA_LOGIT_ROWS;
        if (rows == 1) /* the usual case, a prompt's last token: the decode step's GEMV
                          (with the norm inside), which streams lm_head at full speed */
            CK(k_gemv_f16(p->logits, g->lm_head, NULL, p->x + (size_t)r * c->hidden,
                          g->final_norm, (float)c->eps, c->vocab, c->hidden, 0, g->stream));
        else {
            CK(k_rmsnorm(p->xn, NULL, NULL, p->x + (size_t)r * c->hidden, g->final_norm, rows,
                         c->hidden, (float)c->eps, g->stream));
            CK(k_gemm_f16(p->logits, p->xn, NULL, g->lm_head, NULL, rows, c->vocab, c->hidden, 0,
                          NULL, g->stream));
        }
        for (uint32_t i = 0; host && i < rows; i++)
            if (r + i >= copy_from)
                CK(cudaMemcpyAsync(host + (size_t)(r + i - copy_from) * c->vocab,
                                   p->logits + (size_t)i * c->vocab, (size_t)c->vocab * 4,
                                   cudaMemcpyDeviceToHost, g->stream));
        g->pick_src = p->logits + (size_t)(rows - 1) * c->vocab;
    }
    return cudaSuccess;
}

static cudaError_t set_sampling(gpt_cuda *g, const gpt_cuda_sampling *smp);
static cudaError_t read_state(gpt_cuda *g);

static cudaError_t prefill(gpt_cuda_seq *s, const int32_t *ids, uint32_t n, float *logits,
                           uint32_t n_logits, const gpt_cuda_sampling *pick)
{
    gpt_cuda *g = s->g;
    CK(activate(g, s));
    uint32_t want_from = n - n_logits; /* the first id whose logits go to host */
    for (uint32_t done = 0; done < n;) {
        uint32_t T = n - done < g->chunk ? n - done : g->chunk;
        CK(cudaMemcpyAsync(g->pf.ids, ids + done, T * sizeof(int32_t), cudaMemcpyHostToDevice,
                           g->stream));
        CK(run_chunk(g, T, s->pos));
        bool last = done + T == n;
        uint32_t from = T;
        if (logits && n_logits && want_from < done + T)
            from = want_from > done ? want_from - done : 0;
        if (last && from > T - 1)
            from = T - 1;
        if (from < T) {
            float *host = NULL;
            uint32_t copy_from = 0;
            if (logits && n_logits && want_from < done + T) {
                /* rows of this chunk from want_from on; host rows count from want_from */
                uint32_t first = want_from > done ? want_from - done : 0;
                host = logits + (size_t)(done + first - want_from) * g->cfg.vocab;
                copy_from = first;
            }
            CK(chunk_logits(g, from, T, host, copy_from));
        }
        s->pos += T;
        done += T;
    }
    CK(k_advance(cur_state(g), n, g->stream));
    if (!pick)
        return cudaStreamSynchronize(g->stream);
    CK(set_sampling(g, pick));
    CK(k_pick(cur_state(g), g->pick_src, g->cfg.vocab, g->pick_scratch, 0, g->stream));
    return read_state(g);
}

llmr_status gpt_cuda_prefill(gpt_cuda_seq *s, const int32_t *ids, uint32_t n, float *logits,
                             uint32_t n_logits, const gpt_cuda_sampling *pick, int32_t *id,
                             float *logprob, char *err)
{
    gpt_cuda *g = s->g;
    if (n == 0 || n_logits > n) {
        snprintf(err, 512, "prefill of %u ids with %u rows of logits", n, n_logits);
        return LLMR_INTERNAL;
    }
    if ((uint64_t)s->pos + n > s->max_tokens) {
        snprintf(err, 512, "%u more tokens do not fit: %u of %u positions are used", n, s->pos,
                 s->max_tokens);
        return LLMR_UNSUPPORTED;
    }
    for (uint32_t i = 0; i < n; i++)
        if (ids[i] < 0 || (uint32_t)ids[i] >= g->cfg.vocab) {
            snprintf(err, 512, "id %d at %u is outside the vocabulary of %u", ids[i], i,
                     g->cfg.vocab);
            return LLMR_UNSUPPORTED;
        }
    pthread_mutex_lock(&g->lock);
    uint32_t pos_before = s->pos;
    cudaError_t e = cudaSetDevice(g->device);
    if (e == cudaSuccess)
        e = cudaStreamSynchronize(g->stream); /* the pinned state is free to write */
    if (e == cudaSuccess)
        e = prefill(s, ids, n, logits, n_logits, pick);
    if (e != cudaSuccess)
        s->pos = pos_before;
    s->picked = e == cudaSuccess && pick;
    if (s->picked) {
        if (id)
            *id = g->h_state->pick_id;
        if (logprob)
            *logprob = g->h_state->pick_logprob;
    }
    pthread_mutex_unlock(&g->lock);
    return e == cudaSuccess ? LLMR_OK : gpt_cuda_fail(err, "prefill", e);
}

/* ---- picking and the decode step ------------------------------------------------------------ */

static float greedy_or(float temperature)
{
    return temperature < 1e-5f ? 0.0f : temperature; /* the CPU sampler's threshold */
}

static cudaError_t set_sampling(gpt_cuda *g, const gpt_cuda_sampling *smp)
{
    g->h_state->seed = smp->seed;
    g->h_state->temperature = greedy_or(smp->temperature);
    size_t at = offsetof(SeqState, seed), n = offsetof(SeqState, temperature) + sizeof(float) - at;
    return cudaMemcpyAsync(reinterpret_cast<unsigned char *>(cur_state(g)) + at,
                           reinterpret_cast<unsigned char *>(g->h_state) + at, n,
                           cudaMemcpyHostToDevice, g->stream);
}

static cudaError_t read_state(gpt_cuda *g)
{
    CK(cudaMemcpyAsync(g->h_state, cur_state(g), sizeof(SeqState), cudaMemcpyDeviceToHost,
                       g->stream));
    return cudaStreamSynchronize(g->stream);
}

/* The decode step: the token in the state at its position through every layer, the
 * logits, the position advanced, the next token picked. */
static cudaError_t enqueue_step(gpt_cuda *g)
{
    const gpt_config *c = &g->cfg;
    DecodeBuf *d = &g->dc;
    cudaStream_t st = g->stream;
    SeqState *state = cur_state(g);
    uint32_t H = c->hidden, QW = c->heads * c->head_dim, k = c->top_k;
    float eps = (float)c->eps, limit = (float)c->swiglu_limit;
    CK(k_embed(d->x, g->embed, &state->token, 1, H, st));
    for (uint32_t l = 0; l < c->layers; l++) {
        const DevLayer *L = &g->layers[l];
        const KvView *kv = cur_kv(g) + l;
        /* the RMSNorms happen inside the kernels that read their output, the router's
         * top-k inside its GEMV */
        CK(k_gemv_f16(d->qkv, L->wqkv, L->bqkv, d->x, L->attn_norm, eps, qkv_width(c), H, 0,
                      st));
        CK(k_rope(d->qkv, kv, g->cos_sin, &state->pos, 0, 1, c->heads, c->kv_heads,
                  c->head_dim, st));
        CK(k_attention_decode(d->attn, d->part, d->qkv, kv, L->sinks, &state->pos, c->heads,
                              c->kv_heads, c->head_dim, L->window, L->splits, st));
        CK(k_gemv_f16(d->x, L->wo, L->bo, d->attn, NULL, 0.0f, H, QW, 1, st));
        CK(k_router_decode(d->eids, d->ew, d->xq, d->x, L->mlp_norm, eps, L->wr, L->br, H,
                           c->experts, k, st));
        CK(k_moe_gate_up_gemv(d->act, L->gu_blocks, L->gu_scales, L->gu_bias, d->eids, d->xq, k,
                              H, c->inter, SWIGLU_ALPHA, limit, st));
        CK(k_moe_down_gemv(d->x, L->dn_blocks, L->dn_scales, L->dn_bias, d->eids, d->ew, d->act,
                           d->moe_down, k, H, c->inter, st));
    }
    CK(k_gemv_f16(d->logits, g->lm_head, NULL, d->x, g->final_norm, eps, c->vocab, H, 0,
                  st));
    return k_pick(state, d->logits, c->vocab, g->pick_scratch, 1, st); /* and pos += 1 */
}

static cudaError_t capture(gpt_cuda *g)
{
    cudaGraph_t graph = NULL;
    CK(cudaStreamBeginCapture(g->stream, cudaStreamCaptureModeThreadLocal));
    cudaError_t e = enqueue_step(g);
    cudaError_t end = cudaStreamEndCapture(g->stream, &graph);
    if (e == cudaSuccess)
        e = end;
    if (e == cudaSuccess)
        e = cudaGraphInstantiate(&g->graph, graph, 0);
    if (graph)
        cudaGraphDestroy(graph);
    if (e == cudaSuccess)
        g->graph_ready = true;
    return e;
}

static cudaError_t decode(gpt_cuda_seq *s, int32_t token, float *logits)
{
    gpt_cuda *g = s->g;
    CK(activate(g, s));
    CK(cudaStreamSynchronize(g->stream)); /* the pinned buffers are free */
    if (token >= 0) {
        *g->h_token = token;
        CK(cudaMemcpyAsync(&cur_state(g)->token, g->h_token, sizeof(int32_t),
                           cudaMemcpyHostToDevice, g->stream));
    }
    if (!g->graph_ready)
        CK(capture(g));
    CK(cudaGraphLaunch(g->graph, g->stream));
    if (logits)
        CK(cudaMemcpyAsync(logits, g->dc.logits, (size_t)g->cfg.vocab * 4, cudaMemcpyDeviceToHost,
                           g->stream));
    return read_state(g);
}

llmr_status gpt_cuda_decode(gpt_cuda_seq *s, int32_t token, float *logits, int32_t *id,
                            float *logprob, char *err)
{
    gpt_cuda *g = s->g;
    if (s->pos + 1 > s->max_tokens) {
        snprintf(err, 512, "the sequence is full (%u positions)", s->max_tokens);
        return LLMR_UNSUPPORTED;
    }
    if (token < 0 && !s->picked) {
        snprintf(err, 512, "a decode step with no token: pick one first");
        return LLMR_INTERNAL;
    }
    if (token >= (int32_t)g->cfg.vocab) {
        snprintf(err, 512, "id %d is outside the vocabulary of %u", token, g->cfg.vocab);
        return LLMR_UNSUPPORTED;
    }
    pthread_mutex_lock(&g->lock);
    cudaError_t e = cudaSetDevice(g->device);
    if (e == cudaSuccess)
        e = decode(s, token, logits);
    if (e == cudaSuccess) {
        s->pos++;
        s->picked = true;
        if (id)
            *id = g->h_state->pick_id;
        if (logprob)
            *logprob = g->h_state->pick_logprob;
    }
    pthread_mutex_unlock(&g->lock);
    return e == cudaSuccess ? LLMR_OK : gpt_cuda_fail(err, "decode step", e);
}
