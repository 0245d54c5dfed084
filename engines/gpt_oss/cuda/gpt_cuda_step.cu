/* The step of the gpt-oss CUDA path: every item's tokens through the model in one forward
 * pass over the paged KV cache, then the rows of logits the items want, picked on the GPU
 * or copied to the host.  See gpt_cuda.h.
 *
 * Per layer, for T tokens: RMSNorm to split fp16, the QKV projection as one tensor-core
 * GEMM of T rows, RoPE at each token's position writing its key and value into its
 * sequence's blocks, attention of each token over its own sequence (k_attention_paged),
 * the output projection, the router, the tokens grouped by expert so that each expert's
 * MXFP4 weights are read once per step, gate_up and down as grouped GEMMs, the weighted
 * sum.  Then lm_head for the rows whose logits are wanted, in groups of at most `rows`.
 *
 * A step of one token (one decoding sequence) takes the matrix-vector kernels instead
 * (k_gemv.cu: the weights streamed at full bandwidth), and when that token is picked on
 * the GPU the whole step is one CUDA graph, captured at its first use; its inputs are
 * read from fixed device buffers that each step fills before launching it.  With
 * batch_invariant (gpt_cuda_impl.cuh) every step takes the GEMM path with one order of
 * sums whatever the batch. */
#include <float.h>
#include <stdio.h>
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

/* Splits of the attention's keys for T tokens: about two blocks per SM in all, no more
 * than the longest range of keys has tiles of 64. */
static uint32_t attn_splits(const gpt_cuda *g, uint32_t T, uint32_t max_keys)
{
    uint32_t blocks = T * g->cfg.kv_heads;
    uint32_t want = (2u * (uint32_t)g->sms + blocks - 1) / blocks;
    uint32_t tiles = (max_keys + 63) / 64;
    if (want > tiles)
        want = tiles;
    if (want > GPT_CUDA_SPLITS_MAX)
        want = GPT_CUDA_SPLITS_MAX;
    if ((uint64_t)T * want > GPT_CUDA_SPLIT_ROWS)
        want = GPT_CUDA_SPLIT_ROWS / T;
    return want ? want : 1;
}

/* ---- the forward passes ------------------------------------------------------------------ */

/* The experts' products of a step: `tile` (0: the one chosen by rows an expert), or with
 * batch_invariant always the 64-row one (the same order of sums for any batch). */
static cudaError_t experts_gemm(const gpt_cuda *g, uint32_t tile, float *C, f16 *act, const f16 *A,
                                const int32_t *a_rows, const uint8_t *blocks,
                                const uint8_t *scales, const float *bias, uint32_t T,
                                uint32_t N, uint32_t K, cudaStream_t st)
{
    const gpt_config *c = &g->cfg;
    const StepBuf *b = &g->sb;
    float limit = (float)c->swiglu_limit;
    return k_gemm_mxfp4_grouped_tile(g->invariant ? 64 : tile, C, act, A, a_rows, blocks, scales, bias,
                                     b->offsets, c->experts, T, T * c->top_k, N, K, SWIGLU_ALPHA, limit,
                                     st);
}

/* Whether both of a step's experts' products take the fragments kernel, which then reads
 * its tokens in the operand order (GPT_MOE_TILE_FRAGMENTS16_OPERAND): the MLP's normed
 * rows and gate_up's output are written that way.  About 3% less time for the experts at
 * 8 to 12 rows an expert than reading the tokens in their order by ldmatrix
 * (BENCHMARKS.md). */
static bool experts_in_operand_order(const gpt_cuda *g, uint32_t T)
{
    const gpt_config *c = &g->cfg;
    uint32_t E = c->experts, pairs = T * c->top_k;
    return !g->invariant && c->hidden % 32 == 0 && c->inter % 32 == 0 &&
           k_gemm_mxfp4_grouped_pick(E, T, pairs, 2 * c->inter, c->hidden) == GPT_MOE_TILE_FRAGMENTS16 &&
           k_gemm_mxfp4_grouped_pick(E, T, pairs, c->hidden, c->inter) == GPT_MOE_TILE_FRAGMENTS16;
}

/* A dense product of a multi-token step (k_gemm_f16's contract): up to 64 rows on Hopper
 * the wgmma kernel (split_scratch: a product whose K may be split, QKV and O; lm_head
 * and the batch-invariant option pass none); cuBLAS where the model opened it and
 * blas_gemm_preferred says so; else the engine's mma.sync kernels. */
static cudaError_t dense(const gpt_cuda *g, float *C, const f16 *A, const f16 *A_lo, const f16 *B,
                         const float *bias, uint32_t M, uint32_t N, uint32_t K, int accumulate,
                         float *split_scratch, cudaStream_t st)
{
    if (g->wgmma && split_scratch && M <= 64 && K % 64 == 0)
        return k_gemm_f16_wgmma(0, C, A, A_lo, B, bias, M, N, K, accumulate, split_scratch, st);
    if (g->blas && blas_gemm_preferred(M, split_scratch != NULL))
        return blas_gemm_f16(g->blas, C, A, A_lo, B, bias, M, N, K, accumulate, st);
    return k_gemm_f16(C, A, A_lo, B, bias, M, N, K, accumulate, split_scratch, st);
}

/* T tokens (ids, tok, tables in device memory); max_pos: the furthest position. */
static cudaError_t forward(gpt_cuda *g, uint32_t T, uint32_t max_pos)
{
    const gpt_config *c = &g->cfg;
    StepBuf *b = &g->sb;
    cudaStream_t st = g->stream;
    uint32_t H = c->hidden, QW = c->heads * c->head_dim, k = c->top_k, E = c->experts;
    uint32_t B = g->kv.block_tokens;
    float eps = (float)c->eps;
    float *split_k = g->invariant ? NULL : b->gemm_parts; /* no split of K: one order */
    const bool operand = experts_in_operand_order(g, T);
    const uint32_t experts_tile = operand ? GPT_MOE_TILE_FRAGMENTS16_OPERAND : 0;
    CK(k_embed(b->x, g->embed, b->ids, T, H, st));
    /* the first layer's attention norm; each later one's comes with the layer before's
     * experts' sum (k_moe_combine_rmsnorm) */
    CK(k_rmsnorm(b->xn, b->xn_lo, NULL, b->x, g->layers[0].attn_norm, T, H, eps, st));
    for (uint32_t l = 0; l < c->layers; l++) {
        const DevLayer *L = &g->layers[l];
        uint32_t keys = L->window && L->window < max_pos + 1 ? L->window : max_pos + 1;
        CK(dense(g, b->qkv, b->xn, b->xn_lo, L->wqkv, L->bqkv, T, qkv_width(c), H, 0, split_k,
                 st));
        CK(k_rope_kv_paged(b->qkv, L->kv, b->tok, L->which, g->cos_sin, T, c->heads,
                           c->kv_heads, c->head_dim, B, st));
        CK(k_attention_paged(b->attn, b->attn_lo, NULL, b->attn_split, b->qkv, L->kv,
                             b->tok, b->tables, L->which, L->sinks, T, c->heads, c->kv_heads,
                             c->head_dim, B, L->window,
                             g->invariant ? 1 : attn_splits(g, T, keys), st));
        CK(dense(g, b->x, b->attn, b->attn_lo, L->wo, L->bo, T, H, QW, 1, split_k, st));
        CK(k_rmsnorm_router(b->xn, b->xf, operand, b->x, L->mlp_norm, eps, b->eids, b->ew, L->wr, L->br, T,
                            H, E, k, st));
        CK(k_moe_group(b->rows, b->slot_of, b->counts, b->offsets, b->eids, T, k, E, st));
        CK(experts_gemm(g, experts_tile, NULL, b->act, b->xn, b->rows, L->gu_blocks, L->gu_scales,
                        L->gu_bias, T, 2 * c->inter, H, st));
        CK(experts_gemm(g, experts_tile, b->moe_out, NULL, b->act, NULL, L->dn_blocks, L->dn_scales,
                        L->dn_bias, T, H, c->inter, st));
        if (l + 1 < c->layers) /* xn is free: the experts' products have read it */
            CK(k_moe_combine_rmsnorm(b->x, b->moe_out, b->slot_of, b->ew, T, k, H, b->xn, b->xn_lo,
                                     g->layers[l + 1].attn_norm, eps, st));
        else
            CK(k_moe_combine(b->x, b->moe_out, b->slot_of, b->ew, T, k, H, st));
    }
    return cudaSuccess;
}

/* One token through the matrix-vector kernels; with pick, its logits into logits row 0
 * and their pick (prow[0]) into pout[0], through the filters' cut with cuts.  Nothing in
 * it depends on the host but T = 1: the graphs of the one-token step. */
static cudaError_t forward_one(gpt_cuda *g, bool pick, bool cuts)
{
    const gpt_config *c = &g->cfg;
    StepBuf *b = &g->sb;
    cudaStream_t st = g->stream;
    uint32_t H = c->hidden, QW = c->heads * c->head_dim, k = c->top_k;
    uint32_t B = g->kv.block_tokens;
    float eps = (float)c->eps, limit = (float)c->swiglu_limit;
    CK(k_embed(b->x, g->embed, b->ids, 1, H, st));
    for (uint32_t l = 0; l < c->layers; l++) {
        const DevLayer *L = &g->layers[l];
        /* the splits of a long context (fixed, so that one graph serves every length; a
         * split past the keys exits at once) */
        uint32_t splits = L->window ? (L->window + 63) / 64 + 1 : GPT_CUDA_SPLITS_MAX;
        /* the RMSNorms happen inside the kernels that read their output, the router's
         * top-k inside its GEMV */
        CK(k_gemv_f16(b->qkv, L->wqkv, L->bqkv, b->x, L->attn_norm, eps, qkv_width(c), H, 0,
                      st));
        CK(k_rope_kv_paged(b->qkv, L->kv, b->tok, L->which, g->cos_sin, 1, c->heads,
                           c->kv_heads, c->head_dim, B, st));
        CK(k_attention_paged(NULL, NULL, b->attn_f, b->attn_split, b->qkv, L->kv, b->tok,
                             b->tables, L->which, L->sinks, 1, c->heads, c->kv_heads,
                             c->head_dim, B, L->window, splits, st));
        CK(k_gemv_f16(b->x, L->wo, L->bo, b->attn_f, NULL, 0.0f, H, QW, 1, st));
        CK(k_router_decode(b->d_eids, b->d_ew, b->xq, b->x, L->mlp_norm, eps, L->wr, L->br, H,
                           c->experts, k, st));
        CK(k_moe_gate_up_gemv(b->d_act, L->gu_blocks, L->gu_scales, L->gu_bias, b->d_eids, b->xq,
                              k, H, c->inter, SWIGLU_ALPHA, limit, st));
        CK(k_moe_down_gemv(b->x, L->dn_blocks, L->dn_scales, L->dn_bias, b->d_eids, b->d_ew,
                           b->d_act, b->moe_down, k, H, c->inter, st));
    }
    if (pick) {
        CK(k_gemv_f16(b->logits, g->lm_head, NULL, b->x, g->final_norm, eps, c->vocab, H, 0, st));
        CK(k_pick_rows(b->pout, b->prow, b->logits, 1, c->vocab, b->pick_scratch, cuts, st));
    }
    return cudaSuccess;
}

/* graph1[which]: the one-token step with (1) or without (0) the filters' cut. */
static cudaError_t capture_graph(gpt_cuda *g, int which)
{
    cudaGraph_t graph = NULL;
    cudaError_t e = cudaStreamBeginCapture(g->stream, cudaStreamCaptureModeThreadLocal);
    if (e != cudaSuccess)
        return e;
    e = forward_one(g, true, which == 1);
    cudaError_t end = cudaStreamEndCapture(g->stream, &graph);
    if (e == cudaSuccess)
        e = end;
    if (e == cudaSuccess)
        e = cudaGraphInstantiate(&g->graph1[which], graph, 0);
    if (graph)
        cudaGraphDestroy(graph);
    return e;
}

static cudaError_t capture_one(gpt_cuda *g)
{
    if (g->graph1_ready)
        return cudaSuccess;
    cudaError_t e = capture_graph(g, 0);
    if (e != cudaSuccess)
        return e;
    e = capture_graph(g, 1);
    if (e != cudaSuccess) {
        cudaGraphExecDestroy(g->graph1[0]);
        return e;
    }
    g->graph1_ready = true;
    return cudaSuccess;
}

/* ---- the step's inputs --------------------------------------------------------------------- */

/* A row of logits the step wants: from token `t`; picked into item `item` or copied to
 * `host`. */
struct LogitRow {
    uint32_t t;
    int32_t item; /* -1: a host row */
    float *host;
};

struct Plan {
    uint32_t T, n_tables, n_pick, max_pos;
    bool cuts; /* a pick row has top_k, top_p or min_p */
    uint32_t n_pen; /* the pick rows' penalty entries, in the pinned h_pen */
    bool tops;      /* a pick row wants top_logprobs */
    LogitRow *rows; /* picks first */
    uint32_t n_rows;
};

static bool table_has(const uint32_t *table, uint32_t n, uint32_t block)
{
    return block < n && table[block] != GPT_KV_NO_BLOCK;
}

/* Fills the pinned inputs from the items; false with err for what the step cannot run. */
static llmr_status plan_step(gpt_cuda *g, const gpt_cuda_item *items, uint32_t n, Plan *p,
                             char *err)
{
    const gpt_config *c = &g->cfg;
    StepBuf *b = &g->sb;
    const uint32_t B = g->kv.block_tokens;
    const bool sliding_pool = g->kv.window > 0;
    const size_t off_tok = (unsigned char *)b->tok - b->in, off_rows = (unsigned char *)b->lrows - b->in;
    const size_t off_prow = (unsigned char *)b->prow - b->in, off_tab = (unsigned char *)b->tables - b->in;
    int32_t *ids = reinterpret_cast<int32_t *>(b->h_in);
    StepToken *tok = reinterpret_cast<StepToken *>(b->h_in + off_tok);
    int32_t *lrows = reinterpret_cast<int32_t *>(b->h_in + off_rows);
    PickRow *prow = reinterpret_cast<PickRow *>(b->h_in + off_prow);
    uint32_t *tables = reinterpret_cast<uint32_t *>(b->h_in + off_tab);
    memset(p, 0, sizeof *p);
    if (n == 0 || n > g->rows) {
        snprintf(err, 512, "a step of %u items: this model takes 1 to %u", n, g->rows);
        return LLMR_UNSUPPORTED;
    }
    uint32_t host_rows = 0;
    for (uint32_t i = 0; i < n; i++) {
        const gpt_cuda_item *it = &items[i];
        if (it->count == 0 || (uint64_t)it->start + it->count > g->context ||
            (it->logits && it->logits_from >= it->count)) {
            snprintf(err, 512, "item %u: %u tokens at %u (rows of logits from %u): this model "
                               "holds %u positions", i, it->count, it->start, it->logits_from,
                     g->context);
            return LLMR_UNSUPPORTED;
        }
        if ((uint64_t)p->T + it->count > g->chunk) {
            snprintf(err, 512, "a step of more than %u tokens", g->chunk);
            return LLMR_UNSUPPORTED;
        }
        uint32_t end = it->start + it->count, blocks = (end + B - 1) / B;
        if ((uint64_t)p->n_tables + 2ull * blocks > b->tables_cap) {
            snprintf(err, 512, "the step's block tables pass %zu entries", b->tables_cap);
            return LLMR_UNSUPPORTED;
        }
        uint32_t at_full = p->n_tables, at_ring = at_full + blocks;
        for (uint32_t k = 0; k < blocks; k++) {
            tables[at_full + k] = k < it->n_full ? it->full[k] : GPT_KV_NO_BLOCK;
            tables[at_ring + k] = sliding_pool && k < it->n_ring ? it->ring[k] : GPT_KV_NO_BLOCK;
            if (!table_has(it->full, it->n_full, k)) {
                snprintf(err, 512, "item %u: no block for positions %u.. in its full table", i,
                         k * B);
                return LLMR_INTERNAL;
            }
        }
        p->n_tables += 2 * blocks;
        for (uint32_t j = 0; j < it->count; j++) {
            uint32_t t = p->T + j, pos = it->start + j;
            int32_t id = it->tokens[j];
            if (id < 0 || (uint32_t)id >= c->vocab) {
                snprintf(err, 512, "item %u: id %d is outside the vocabulary of %u", i, id,
                         c->vocab);
                return LLMR_UNSUPPORTED;
            }
            uint32_t lo = sliding_pool && pos + 1 > g->kv.window ? pos + 1 - g->kv.window : 0;
            if (sliding_pool && (!table_has(it->ring, it->n_ring, lo / B) ||
                                 !table_has(it->ring, it->n_ring, pos / B))) {
                snprintf(err, 512, "item %u: the sliding table lacks positions %u..%u", i, lo,
                         pos);
                return LLMR_INTERNAL;
            }
            ids[t] = id;
            tok[t].pos = pos;
            tok[t].table[0] = at_full;
            tok[t].table[1] = at_ring;
            tok[t].slot[0] = it->full[pos / B] * B + pos % B;
            tok[t].slot[1] = sliding_pool ? it->ring[pos / B] * B + pos % B : 0;
        }
        if (end - 1 > p->max_pos)
            p->max_pos = end - 1;
        if (it->pick)
            p->n_pick++;
        if (it->logits)
            host_rows += it->count - it->logits_from;
        p->T += it->count;
    }
    p->rows = static_cast<LogitRow *>(malloc((p->n_pick + host_rows) * sizeof *p->rows));
    if (!p->rows) {
        snprintf(err, 512, "out of memory");
        return LLMR_OOM_RAM;
    }
    uint32_t t0 = 0, picks = 0;
    for (uint32_t i = 0; i < n; i++) {
        const gpt_cuda_item *it = &items[i];
        if (it->pick) {
            lrows[picks] = (int32_t)(t0 + it->count - 1);
            if (it->n_pen > GPT_CUDA_PEN_CAP - p->n_pen) {
                snprintf(err, 512, "a step's penalties pass %u seen tokens", GPT_CUDA_PEN_CAP);
                return LLMR_UNSUPPORTED; /* the caller frees p->rows */
            }
            PenEntry *pen = b->h_pen + p->n_pen;
            for (uint32_t j = 0; j < it->n_pen; j++)
                pen[j] = PenEntry{it->pen_ids[j], it->pen_counts[j]};
            prow[picks] = PickRow{it->temperature < 1e-5f ? 0.0f : it->temperature,
                                  it->top_k,
                                  it->seed,
                                  it->draw,
                                  it->top_p,
                                  it->min_p,
                                  p->n_pen,
                                  it->n_pen,
                                  it->n_pen ? it->repetition : 1.0f,
                                  it->presence,
                                  it->frequency,
                                  it->top_logprobs < GPT_TOP_MAX ? it->top_logprobs : GPT_TOP_MAX};
            p->n_pen += it->n_pen;
            p->tops |= it->top_logprobs > 0;
            p->cuts |= prow[picks].temperature > 0.0f &&
                       ((it->top_k > 0 && it->top_k < g->cfg.vocab) ||
                        (it->top_p > 0.0f && it->top_p < 1.0f) || it->min_p > 0.0f);
            p->rows[picks++] = LogitRow{t0 + it->count - 1, (int32_t)i, NULL};
        }
        t0 += it->count;
    }
    p->n_rows = picks;
    t0 = 0;
    for (uint32_t i = 0; i < n; i++) {
        const gpt_cuda_item *it = &items[i];
        for (uint32_t r = it->logits ? it->logits_from : it->count; r < it->count; r++)
            p->rows[p->n_rows++] = LogitRow{t0 + r, -1, it->logits + (size_t)(r - it->logits_from) * c->vocab};
        t0 += it->count;
    }
    return LLMR_OK;
}

static_assert(GPT_TOP_MAX == GPT_CUDA_TOP_MAX, "one bound of top_logprobs");

/* A pick row's top_logprobs from its gathered entries: most likely first, ties to the
 * lower id, each logit - max - lse in double as the CPU sampler does. */
static void fill_top(gpt_cuda_item *it, const TopEntry *e, uint32_t count, const PickOut *o)
{
    TopEntry top[GPT_TOP_MAX];
    uint32_t n = count < GPT_TOP_MAX ? count : GPT_TOP_MAX;
    if (n > it->top_logprobs)
        n = it->top_logprobs;
    for (uint32_t i = 0; i < n; i++) { /* an insertion sort of at most 20 */
        TopEntry x = e[i];
        uint32_t j = i;
        while (j > 0 && (x.logit > top[j - 1].logit || (x.logit == top[j - 1].logit && x.id < top[j - 1].id))) {
            top[j] = top[j - 1];
            j--;
        }
        top[j] = x;
    }
    it->top_count = 0;
    for (uint32_t i = 0; i < n; i++) {
        double lp = (double)top[i].logit - (double)o->max - (double)o->lse;
        if (lp <= -(double)FLT_MAX)
            break;
        it->top_ids[i] = top[i].id;
        it->top_logprobs_out[i] = (float)lp;
        it->top_count = i + 1;
    }
}

/* The pinned inputs' pieces that the plan used, to the device. */
static cudaError_t upload(gpt_cuda *g, const Plan *p)
{
    StepBuf *b = &g->sb;
    cudaStream_t st = g->stream;
    size_t at;
#define UP(dev, bytes) \
    at = (unsigned char *)(dev) - b->in; \
    CK(cudaMemcpyAsync(b->in + at, b->h_in + at, (bytes), cudaMemcpyHostToDevice, st))
    UP(b->ids, p->T * sizeof(int32_t));
    UP(b->tok, p->T * sizeof(StepToken));
    if (p->n_pick) {
        UP(b->lrows, p->n_pick * sizeof(int32_t));
        UP(b->prow, p->n_pick * sizeof(PickRow));
    }
    if (p->n_pen)
        CK(cudaMemcpyAsync(b->pen, b->h_pen, p->n_pen * sizeof(PenEntry), cudaMemcpyHostToDevice, st));
    UP(b->tables, p->n_tables * sizeof(uint32_t));
#undef UP
    return cudaSuccess;
}

/* ---- logits and picks ------------------------------------------------------------------------ */

/* Rows [first, first + R) of the plan's logit rows into b->logits (lrows on the device
 * hold their tokens already). */
static cudaError_t rows_logits(gpt_cuda *g, const Plan *p, uint32_t first, uint32_t R)
{
    const gpt_config *c = &g->cfg;
    StepBuf *b = &g->sb;
    cudaStream_t st = g->stream;
    float eps = (float)c->eps;
    if (R == 1) /* the decode's usual case: the GEMV (norm inside) streams lm_head at full speed */
        return k_gemv_f16(b->logits, g->lm_head, NULL, b->x + (size_t)p->rows[first].t * c->hidden,
                          g->final_norm, eps, c->vocab, c->hidden, 0, st);
    CK(k_gather_rows(b->xg, b->x, b->lrows, R, c->hidden, st));
    CK(k_rmsnorm(b->xn, NULL, NULL, b->xg, g->final_norm, R, c->hidden, eps, st));
    return dense(g, b->logits, b->xn, NULL, g->lm_head, NULL, R, c->vocab, c->hidden, 0, NULL, st);
}

/* Every logit row of the plan: picks (the first group), host copies. */
static cudaError_t finish_rows(gpt_cuda *g, const Plan *p, gpt_cuda_item *items)
{
    const gpt_config *c = &g->cfg;
    StepBuf *b = &g->sb;
    cudaStream_t st = g->stream;
    int32_t *h_lrows = reinterpret_cast<int32_t *>(b->h_in + ((unsigned char *)b->lrows - b->in));
    for (uint32_t first = 0; first < p->n_rows; first += g->rows) {
        uint32_t R = p->n_rows - first < g->rows ? p->n_rows - first : g->rows;
        if (first > 0 || R > p->n_pick) { /* the host rows' tokens: not uploaded yet */
            CK(cudaStreamSynchronize(st)); /* the pinned inputs are free to write */
            for (uint32_t r = 0; r < R; r++)
                h_lrows[r] = (int32_t)p->rows[first + r].t;
            CK(cudaMemcpyAsync(b->lrows, h_lrows, R * sizeof(int32_t), cudaMemcpyHostToDevice, st));
        }
        CK(rows_logits(g, p, first, R));
        uint32_t picks = first == 0 ? p->n_pick : 0;
        if (picks && p->n_pen)
            CK(k_apply_penalties(b->logits, b->prow, b->pen, picks, c->vocab, st));
        if (picks) {
            CK(k_pick_rows(b->pout, b->prow, b->logits, picks, c->vocab, b->pick_scratch, p->cuts,
                           st));
            CK(cudaMemcpyAsync(b->h_pout, b->pout, picks * sizeof(PickOut), cudaMemcpyDeviceToHost, st));
        }
        if (picks && p->tops) {
            CK(k_top_logprobs(b->top, b->top_counts, b->prow, b->logits, picks, c->vocab,
                              b->top_scratch, st));
            CK(cudaMemcpyAsync(b->h_top, b->top, (size_t)picks * GPT_TOP_MAX * sizeof(TopEntry),
                               cudaMemcpyDeviceToHost, st));
            CK(cudaMemcpyAsync(b->h_top_counts, b->top_counts, picks * sizeof(uint32_t),
                               cudaMemcpyDeviceToHost, st));
        }
        for (uint32_t r = picks; r < R; r++)
            CK(cudaMemcpyAsync(p->rows[first + r].host, b->logits + (size_t)r * c->vocab,
                               (size_t)c->vocab * sizeof(float), cudaMemcpyDeviceToHost, st));
        CK(cudaStreamSynchronize(st));
        for (uint32_t r = 0; r < picks; r++) {
            gpt_cuda_item *it = &items[p->rows[r].item];
            it->picked = b->h_pout[r].id;
            it->logprob = b->h_pout[r].logprob;
            if (p->tops)
                fill_top(it, b->h_top + (size_t)r * GPT_TOP_MAX, b->h_top_counts[r], &b->h_pout[r]);
        }
    }
    return cudaStreamSynchronize(st);
}

/* ---- the step ------------------------------------------------------------------------------ */

static cudaError_t run(gpt_cuda *g, const Plan *p, gpt_cuda_item *items, uint32_t n)
{
    CK(upload(g, p));
    bool one = p->T == 1 && n == 1 && !g->invariant;
    if (one && p->n_pick == 1 && p->n_rows == 1 && !p->n_pen && !p->tops) {
        if (!g->graph1_ready)
            CK(capture_one(g));
        CK(cudaGraphLaunch(g->graph1[p->cuts], g->stream));
        CK(cudaMemcpyAsync(g->sb.h_pout, g->sb.pout, sizeof(PickOut), cudaMemcpyDeviceToHost,
                           g->stream));
        CK(cudaStreamSynchronize(g->stream));
        items[0].picked = g->sb.h_pout[0].id;
        items[0].logprob = g->sb.h_pout[0].logprob;
        return cudaSuccess;
    }
    if (one)
        CK(forward_one(g, false, false));
    else
        CK(forward(g, p->T, p->max_pos));
    return p->n_rows ? finish_rows(g, p, items) : cudaStreamSynchronize(g->stream);
}

llmr_status gpt_cuda_prepare(gpt_cuda *g, char *err)
{
    cudaError_t e = cudaSetDevice(g->device);
    if (e == cudaSuccess && !g->invariant)
        e = capture_one(g); /* captured, not run: its memory is taken now, not mid-serving */
    return e == cudaSuccess ? LLMR_OK : gpt_cuda_fail(err, "capturing the one-token step", e);
}

llmr_status gpt_cuda_step(gpt_cuda *g, gpt_cuda_item *items, uint32_t n, char *err)
{
    cudaError_t e = cudaSetDevice(g->device);
    if (e == cudaSuccess)
        e = cudaStreamSynchronize(g->stream); /* the pinned inputs are free to write */
    if (e != cudaSuccess)
        return gpt_cuda_fail(err, "a step", e);
    Plan p;
    llmr_status s = plan_step(g, items, n, &p, err);
    if (s == LLMR_OK) {
        e = run(g, &p, items, n);
        if (e != cudaSuccess)
            s = gpt_cuda_fail(err, "a step", e);
    }
    free(p.rows);
    return s;
}
