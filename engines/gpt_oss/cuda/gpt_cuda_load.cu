/* Loading the gpt-oss model onto a GPU: shape checks, the weights uploaded from the
 * mapped safetensors through two pinned staging buffers (the CPU threads copy one
 * while the GPU pulls the other), the RoPE table, the step's scratch, and the paged KV
 * cache's two pools sized from what VRAM is left.  Also the VRAM arithmetic the
 * engine's estimate uses.  See gpt_cuda.h. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpt_cuda_impl.cuh"

#define STAGING_BYTES (64u << 20)
#define POOL_RESERVE (256ull << 20) /* VRAM left free for the runtime and graphs */
#define MIN_CONTEXT 256u

static void set_err(char *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void set_err(char *err, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, 512, fmt, ap);
    va_end(ap);
}

llmr_status gpt_cuda_fail(char *err, const char *what, cudaError_t e)
{
    set_err(err, "%s: CUDA error %d (%s)", what, (int)e, cudaGetErrorString(e));
    return e == cudaErrorMemoryAllocation ? LLMR_OOM_VRAM : LLMR_INTERNAL;
}

/* ---- sizes --------------------------------------------------------------------------- */

static uint64_t align256(uint64_t n)
{
    return (n + 255) & ~255ull;
}

static uint32_t qkv_rows(const gpt_config *c)
{
    return (c->heads + 2 * c->kv_heads) * c->head_dim;
}

/* Floats of k_gemm_f16's split scratch for the QKV and output projections of T rows. */
static uint64_t gemm_parts_floats(const gpt_config *c, uint64_t T)
{
    uint32_t widest = qkv_rows(c) > c->hidden ? qkv_rows(c) : c->hidden;
    return k_gemm_split_scratch_bytes(T < 256 ? (uint32_t)T : 256, widest) / sizeof(float);
}

/* KV bytes of one position in one layer: K and V, fp16, or fp8 with a scale per row. */
static uint64_t kv_bytes_per_layer_position(const gpt_config *c, bool fp8)
{
    return fp8 ? 2ull * c->kv_heads * (c->head_dim + sizeof(float))
               : 2ull * c->kv_heads * c->head_dim * sizeof(kv_t);
}

static uint32_t layers_of_kind(const gpt_config *c, bool sliding)
{
    uint32_t n = 0;
    for (uint32_t l = 0; l < c->layers; l++)
        n += (c->sliding[l] && c->window) == sliding;
    return n;
}

static uint32_t logit_rows(uint32_t T)
{
    return T < GPT_CUDA_MAX_ROWS ? T : GPT_CUDA_MAX_ROWS;
}

/* Entries of the step's block tables at most: two tables of every row's whole context. */
static uint64_t tables_cap(uint32_t rows, uint32_t context)
{
    return 2ull * rows * ((context + GPT_CUDA_BLOCK_TOKENS - 1) / GPT_CUDA_BLOCK_TOKENS + 1);
}

static uint64_t round16(uint64_t n)
{
    return (n + 15) & ~15ull;
}

/* Bytes of the step's inputs: ids, tokens, rows of logits, picks, then the tables. */
static uint64_t step_input_bytes(uint32_t T, uint32_t rows, uint32_t context)
{
    return round16(T * 4ull) + round16(T * (uint64_t)sizeof(StepToken)) + round16(rows * 4ull) +
           round16(rows * (uint64_t)sizeof(PickRow)) + tables_cap(rows, context) * 4;
}

static uint64_t scratch_bytes(const gpt_config *c, uint32_t T, uint32_t context)
{
    uint64_t H = c->hidden, Q = (uint64_t)c->heads * c->head_dim, k = c->top_k;
    uint64_t R = logit_rows(T);
    uint64_t step = 2 * T * H * 4 + T * qkv_rows(c) * 4ull + T * k * H * 4 + 2 * T * H * 2 +
                    2 * T * Q * 2 + T * k * c->inter * 2 + 4 * T * k * 4 +
                    gemm_parts_floats(c, T) * 4 + (2 * c->experts + 1) * 4 +
                    k_attention_paged_scratch_floats(GPT_CUDA_SPLIT_ROWS, c->heads, c->head_dim) * 4 +
                    R * c->vocab * 4 + R * H * 4 + k_pick_rows_scratch_bytes((uint32_t)R) +
                    R * sizeof(PickOut) + GPT_CUDA_PEN_CAP * sizeof(PenEntry) +
                    R * (GPT_TOP_MAX * sizeof(TopEntry) + 4) + k_top_logprobs_scratch_bytes((uint32_t)R) +
                    step_input_bytes(T, (uint32_t)R, context);
    uint64_t one = (Q + k) * 4 + k * 4 + k * c->inter * 2 + H * 2 +
                   k_moe_down_scratch_bytes(c->top_k, c->hidden);
    return step + one + 64 * 256; /* each buffer rounded to 256 bytes */
}

uint64_t gpt_cuda_estimate(const gpt_config *c, uint64_t weight_bytes, uint32_t context)
{
    uint32_t T = context < GPT_CUDA_CHUNK ? context : GPT_CUDA_CHUNK;
    uint64_t tables = (uint64_t)context * (c->head_dim / 2) * sizeof(float2);
    /* one sequence of the whole context in the full pool, the window in the sliding one */
    uint64_t kv = kv_bytes_per_layer_position(c, false) *
                  ((uint64_t)layers_of_kind(c, false) * context +
                   (uint64_t)layers_of_kind(c, true) * (c->window + 2 * GPT_CUDA_BLOCK_TOKENS));
    /* small vectors go up as fp32: at most twice their f16 bytes, a rounding error; the
     * cuBLAS workspace where the machine has it */
    return weight_bytes + tables + scratch_bytes(c, T, context) + kv + BLAS_GEMM_WORKSPACE_BYTES;
}

/* ---- device memory --------------------------------------------------------------------- */

static cudaError_t dalloc(gpt_cuda *g, void **out, size_t bytes)
{
    *out = NULL;
    if (g->n_allocs == g->cap_allocs) {
        size_t cap = g->cap_allocs ? 2 * g->cap_allocs : 256;
        void **grown = (void **)realloc(g->allocs, cap * sizeof *grown);
        if (!grown)
            return cudaErrorMemoryAllocation;
        g->allocs = grown;
        g->cap_allocs = cap;
    }
    cudaError_t e = cudaMalloc(out, bytes ? bytes : 1);
    if (e != cudaSuccess)
        return e;
    g->allocs[g->n_allocs++] = *out;
    g->vram += align256(bytes);
    return cudaSuccess;
}

template <typename T>
static cudaError_t dalloc_n(gpt_cuda *g, T **out, size_t n)
{
    return dalloc(g, reinterpret_cast<void **>(out), n * sizeof(T));
}

/* ---- the uploader ------------------------------------------------------------------------- */

struct Uploader {
    gpt_cuda *g;
    gpt_pool *pool;
    uint8_t *buf[2];
    cudaEvent_t ev[2];
    size_t used;
    int cur;
    uint64_t done, total, reported;
    gpt_cuda_progress_fn progress;
    void *user;
    cudaError_t err;
    unsigned long long *overflow; /* device: dense weights beyond fp16's range */
    uint32_t *scale_range;        /* device: [min, max] of the experts' E8M0 scales */
};

struct CopyJob {
    uint8_t *dst;
    const uint8_t *src;
    size_t n;
};

#define COPY_PIECE (1u << 20)

static void copy_pieces(void *ctx, size_t begin, size_t end)
{
    const CopyJob *j = static_cast<const CopyJob *>(ctx);
    for (size_t i = begin; i < end; i++) {
        size_t at = i * COPY_PIECE, n = j->n - at < COPY_PIECE ? j->n - at : COPY_PIECE;
        memcpy(j->dst + at, j->src + at, n);
    }
}

static void up_flip(Uploader *u)
{
    if (u->err == cudaSuccess)
        u->err = cudaEventRecord(u->ev[u->cur], u->g->stream);
    u->cur ^= 1;
    u->used = 0;
    if (u->err == cudaSuccess)
        u->err = cudaEventSynchronize(u->ev[u->cur]); /* its last copy is done */
}

static void up_put(Uploader *u, void *dst, const void *src, size_t n)
{
    uint8_t *d = static_cast<uint8_t *>(dst);
    const uint8_t *s = static_cast<const uint8_t *>(src);
    while (n && u->err == cudaSuccess) {
        if (u->used == STAGING_BYTES)
            up_flip(u);
        size_t take = STAGING_BYTES - u->used < n ? STAGING_BYTES - u->used : n;
        CopyJob job = {u->buf[u->cur] + u->used, s, take};
        if (take >= 4 * COPY_PIECE && u->pool)
            gpt_pool_for(u->pool, (take + COPY_PIECE - 1) / COPY_PIECE, copy_pieces, &job);
        else
            memcpy(job.dst, s, take);
        u->err = cudaMemcpyAsync(d, job.dst, take, cudaMemcpyHostToDevice, u->g->stream);
        u->used += take;
        d += take;
        s += take;
        n -= take;
        u->done += take;
        if (u->progress && (u->done - u->reported >= (512u << 20) || u->done == u->total)) {
            u->reported = u->done;
            u->progress(u->user, u->done, u->total);
        }
    }
}

static uint16_t f32_to_bf16(float f)
{
    uint32_t b;
    memcpy(&b, &f, 4);
    if ((b & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)((b >> 16) | 0x40); /* NaN stays NaN */
    return (uint16_t)((b + 0x7fffu + ((b >> 16) & 1)) >> 16);
}

static uint16_t f32_to_f16(float f)
{
    f = f > 65504.0f ? 65504.0f : f < -65504.0f ? -65504.0f : f;
    __half h = __float2half_rn(f);
    uint16_t bits;
    memcpy(&bits, &h, 2);
    return bits;
}

/* A matrix into dst as fp16 (to_f16) or bf16: bf16 goes up raw (and is converted on the
 * GPU when fp16 is wanted, overflows counted into u->overflow); other dtypes are
 * converted here. */
static void up_matrix(Uploader *u, void *dst, const gpt_matrix *m, bool to_f16)
{
    size_t n = (size_t)m->rows * m->cols;
    if (m->dtype == GPT_DT_BF16 || (m->dtype == GPT_DT_F16 && to_f16)) {
        up_put(u, dst, m->data, n * 2);
        if (to_f16 && m->dtype == GPT_DT_BF16 && u->err == cudaSuccess)
            u->err = k_bf16_to_f16(dst, n, u->overflow, u->g->stream);
        return;
    }
    enum { STEP = 1u << 20 };
    float *f = (float *)malloc(STEP * sizeof *f);
    uint16_t *h = (uint16_t *)malloc(STEP * sizeof *h);
    for (size_t at = 0; f && h && at < n && u->err == cudaSuccess; at += STEP) {
        size_t take = n - at < STEP ? n - at : STEP;
        gpt_decode(m->data, m->dtype, at, take, f);
        for (size_t i = 0; i < take; i++)
            h[i] = to_f16 ? f32_to_f16(f[i]) : f32_to_bf16(f[i]);
        up_put(u, static_cast<uint16_t *>(dst) + at, h, take * 2); /* staged: h is free again */
    }
    if ((!f || !h) && u->err == cudaSuccess)
        u->err = cudaErrorMemoryAllocation;
    free(f);
    free(h);
}

static void up_floats(Uploader *u, float **dst, const float *src, size_t n)
{
    if (u->err == cudaSuccess)
        u->err = dalloc_n(u->g, dst, n);
    if (u->err == cudaSuccess)
        up_put(u, *dst, src, n * sizeof(float));
}

static void up_experts(Uploader *u, uint8_t **blocks, uint8_t **scales, const gpt_mxfp4 *ex,
                       uint32_t E)
{
    size_t groups = (size_t)ex[0].rows * (ex[0].cols / 32);
    if (u->err == cudaSuccess)
        u->err = dalloc_n(u->g, blocks, E * groups * 16);
    if (u->err == cudaSuccess)
        u->err = dalloc_n(u->g, scales, E * groups);
    for (uint32_t e = 0; e < E && u->err == cudaSuccess; e++) {
        up_put(u, *blocks + e * groups * 16, ex[e].blocks, groups * 16);
        up_put(u, *scales + e * groups, ex[e].scales, groups);
    }
    if (u->err == cudaSuccess) /* the bytes as the kernels read them (kernels.cuh) */
        u->err = k_mxfp4_lay_out(*blocks, E * groups, u->g->stream);
    if (u->err == cudaSuccess)
        u->err = k_byte_range(*scales, E * groups, u->scale_range, u->g->stream);
}

static uint64_t upload_total(const gpt_model *m)
{
    const gpt_config *c = &m->cfg;
    uint64_t H = c->hidden, total = 2ull * c->vocab * H * 2;
    for (uint32_t l = 0; l < c->layers; l++) {
        total += (uint64_t)qkv_rows(c) * H * 2 + H * (uint64_t)c->heads * c->head_dim * 2 +
                 (uint64_t)c->experts * H * 2;
        total += (uint64_t)c->experts * (2ull * c->inter * H + H * c->inter) * 17 / 32;
        total += (2 * H + qkv_rows(c) + H + c->heads + c->experts +
                  (uint64_t)c->experts * (2 * c->inter + H)) * 4;
    }
    return total + H * 4;
}

static void upload_layer(Uploader *u, DevLayer *D, const gpt_layer *L, const gpt_config *c)
{
    gpt_cuda *g = u->g;
    uint32_t H = c->hidden, QW = c->heads * c->head_dim, KW = c->kv_heads * c->head_dim;
    up_floats(u, &D->attn_norm, L->attn_norm, H);
    up_floats(u, &D->mlp_norm, L->mlp_norm, H);
    if (u->err == cudaSuccess)
        u->err = dalloc_n(g, &D->wqkv, (size_t)qkv_rows(c) * H);
    if (u->err == cudaSuccess) {
        up_matrix(u, D->wqkv, &L->q, true);
        up_matrix(u, D->wqkv + (size_t)QW * H, &L->k, true);
        up_matrix(u, D->wqkv + (size_t)(QW + KW) * H, &L->v, true);
    }
    if (u->err == cudaSuccess)
        u->err = dalloc_n(g, &D->bqkv, qkv_rows(c));
    if (u->err == cudaSuccess) {
        up_put(u, D->bqkv, L->q_bias, QW * 4);
        up_put(u, D->bqkv + QW, L->k_bias, KW * 4);
        up_put(u, D->bqkv + QW + KW, L->v_bias, KW * 4);
    }
    if (u->err == cudaSuccess)
        u->err = dalloc_n(g, &D->wo, (size_t)H * QW);
    if (u->err == cudaSuccess)
        up_matrix(u, D->wo, &L->o, true);
    up_floats(u, &D->bo, L->o_bias, H);
    up_floats(u, &D->sinks, L->sinks, c->heads);
    if (u->err == cudaSuccess)
        u->err = dalloc_n(g, &D->wr, (size_t)c->experts * H);
    if (u->err == cudaSuccess)
        up_matrix(u, D->wr, &L->router, true);
    up_floats(u, &D->br, L->router_bias, c->experts);
    up_experts(u, &D->gu_blocks, &D->gu_scales, L->gate_up, c->experts);
    up_floats(u, &D->gu_bias, L->gate_up_bias, (size_t)c->experts * 2 * c->inter);
    up_experts(u, &D->dn_blocks, &D->dn_scales, L->down, c->experts);
    up_floats(u, &D->dn_bias, L->down_bias, (size_t)c->experts * H);
}

/* ---- checks ------------------------------------------------------------------------------- */

static llmr_status check_shapes(const gpt_config *c, char *err)
{
    const char *why = NULL;
    if (c->head_dim != 64 && c->head_dim != 16)
        why = "head_dim must be 64 (gpt-oss) or 16 (the tiny preset)";
    else if (c->heads % c->kv_heads || c->heads / c->kv_heads > 8)
        why = "query heads must be a multiple of KV heads, at most 8 per KV head";
    else if (c->experts > GPT_MAX_EXPERTS || c->top_k > 8 || c->top_k > c->experts)
        why = "at most 128 experts and 8 per token";
    else if (c->hidden % 64 || c->inter % 64 || c->hidden > 8192 || c->inter > 8192 ||
             c->heads * c->head_dim > 10240)
        why = "hidden and intermediate sizes must be multiples of 64, at most 8192 (the decode "
              "step's expert kernels take 32 slices of 256 values), and heads x head_dim at "
              "most 10240";
    else if (c->vocab % 8)
        why = "the vocabulary must be a multiple of 8";
    else if (c->layers > 256)
        why = "at most 256 layers";
    if (!why)
        return LLMR_OK;
    set_err(err, "the CUDA path does not take this model's shape: %s", why);
    return LLMR_UNSUPPORTED;
}

/* ---- load and free ------------------------------------------------------------------------- */

static cudaError_t alloc_scratch(gpt_cuda *g)
{
    const gpt_config *c = &g->cfg;
    size_t T = g->chunk, R = g->rows, H = c->hidden, Q = (size_t)c->heads * c->head_dim;
    size_t k = c->top_k;
    StepBuf *b = &g->sb;
    cudaError_t e = cudaSuccess;
#define A(ptr, n) \
    if (e == cudaSuccess) \
    e = dalloc_n(g, &(ptr), (n))
    A(b->x, T * H);
    A(b->xf, T * H);
    A(b->qkv, T * qkv_rows(c));
    A(b->moe_out, T * k * H);
    A(b->xn, T * H);
    A(b->xn_lo, T * H);
    A(b->attn, T * Q);
    A(b->attn_lo, T * Q);
    A(b->gemm_parts, gemm_parts_floats(c, T));
    A(b->attn_split, k_attention_paged_scratch_floats(GPT_CUDA_SPLIT_ROWS, c->heads, c->head_dim));
    A(b->act, T * k * c->inter);
    A(b->eids, T * k);
    A(b->rows, T * k);
    A(b->slot_of, T * k);
    A(b->ew, T * k);
    A(b->counts, c->experts);
    A(b->offsets, c->experts + 1);
    A(b->logits, R * c->vocab);
    A(b->xg, R * H);
    A(b->pout, R);
    A(b->pen, GPT_CUDA_PEN_CAP);
    A(b->top, R * GPT_TOP_MAX);
    A(b->top_counts, R);
    A(b->attn_f, Q);
    A(b->d_ew, k);
    A(b->d_eids, k);
    A(b->xq, H);
    A(b->d_act, k * c->inter);
    if (e == cudaSuccess)
        e = dalloc(g, &b->pick_scratch, k_pick_rows_scratch_bytes((uint32_t)R));
    if (e == cudaSuccess)
        e = dalloc(g, &b->top_scratch, k_top_logprobs_scratch_bytes((uint32_t)R));
    size_t down_bytes = k_moe_down_scratch_bytes(c->top_k, c->hidden);
    if (e == cudaSuccess)
        e = dalloc(g, &b->moe_down, down_bytes);
    if (e == cudaSuccess)
        e = cudaMemset(b->moe_down, 0, down_bytes);
#undef A
    /* the inputs: one device buffer and its pinned twin, cut in the same places */
    b->in_bytes = step_input_bytes((uint32_t)T, (uint32_t)R, g->context);
    b->tables_cap = tables_cap((uint32_t)R, g->context);
    if (e == cudaSuccess)
        e = dalloc(g, reinterpret_cast<void **>(&b->in), b->in_bytes);
    if (e == cudaSuccess)
        e = cudaMallocHost(&b->h_in, b->in_bytes);
    if (e == cudaSuccess)
        e = cudaMallocHost(&b->h_pout, R * sizeof(PickOut));
    if (e == cudaSuccess)
        e = cudaMallocHost(&b->h_pen, GPT_CUDA_PEN_CAP * sizeof(PenEntry));
    if (e == cudaSuccess)
        e = cudaMallocHost(&b->h_top, R * GPT_TOP_MAX * sizeof(TopEntry) + R * sizeof(uint32_t));
    if (e == cudaSuccess)
        b->h_top_counts = reinterpret_cast<uint32_t *>(b->h_top + R * GPT_TOP_MAX);
    if (e == cudaSuccess) {
        unsigned char *at = b->in;
        b->ids = reinterpret_cast<int32_t *>(at);
        at += round16(T * 4);
        b->tok = reinterpret_cast<StepToken *>(at);
        at += round16(T * sizeof(StepToken));
        b->lrows = reinterpret_cast<int32_t *>(at);
        at += round16(R * 4);
        b->prow = reinterpret_cast<PickRow *>(at);
        at += round16(R * sizeof(PickRow));
        b->tables = reinterpret_cast<uint32_t *>(at);
    }
    return e;
}

static cudaError_t make_rope_table(gpt_cuda *g, const gpt_rope *r)
{
    double *inv = NULL;
    cudaError_t e = dalloc_n(g, &g->cos_sin, (size_t)g->context * r->half);
    if (e == cudaSuccess)
        e = cudaMalloc(&inv, r->half * sizeof(double));
    if (e == cudaSuccess)
        e = cudaMemcpy(inv, r->inv_freq, r->half * sizeof(double), cudaMemcpyHostToDevice);
    if (e == cudaSuccess)
        e = k_rope_table(g->cos_sin, inv, r->attn_factor, g->context, r->half, g->stream);
    if (e == cudaSuccess)
        e = cudaStreamSynchronize(g->stream);
    cudaFree(inv);
    return e;
}

/* What runs the dense products of multi-token steps (gpt_cuda_impl.cuh): cuBLAS unless
 * batch_invariant or own_gemm asks for the engine's kernels, its workspace would pass
 * the VRAM budget, or it is not there.  The workspace counts in the model's VRAM. */
static void open_dense(gpt_cuda *g, const gpt_cuda_params *p)
{
    char why[160] = "";
    if (g->invariant)
        snprintf(why, sizeof why, "batch_invariant: one order of sums for any batch");
    else if (p->own_gemm)
        snprintf(why, sizeof why, "the load option \"cublas\": 0");
    else if (p->vram_budget && g->vram + BLAS_GEMM_WORKSPACE_BYTES > p->vram_budget)
        snprintf(why, sizeof why, "its workspace would pass the VRAM budget");
    else if ((g->blas = blas_gemm_open(why, sizeof why)) != NULL)
        g->vram += BLAS_GEMM_WORKSPACE_BYTES;
    g->wgmma = !g->invariant && k_wgmma_available();
    const char *few = g->wgmma ? "; QKV and O of up to 64 rows the engine's wgmma kernel" : "";
    if (g->blas)
        snprintf(g->dense_by, sizeof g->dense_by, "cuBLAS%s", few);
    else
        snprintf(g->dense_by, sizeof g->dense_by, "the engine's kernels (%s)%s", why, few);
}

/* The paged KV cache: the sliding pool holds the window (and a step's chunk) of every
 * row a step can carry; the full pool what `sequences` full-context sequences need (or
 * kv_pool_bytes), within free VRAM (less a reserve) and the budget.  The context shrinks
 * to what the full pool holds. */
static llmr_status make_kv(gpt_cuda *g, const gpt_cuda_params *p, char *err)
{
    const gpt_config *c = &g->cfg;
    const uint32_t B = GPT_CUDA_BLOCK_TOKENS;
    size_t free_b = 0, total_b = 0;
    cudaError_t e = cudaMemGetInfo(&free_b, &total_b);
    if (e != cudaSuccess)
        return gpt_cuda_fail(err, "reading free VRAM", e);
    uint64_t avail = free_b > POOL_RESERVE ? free_b - POOL_RESERVE : 0;
    if (p->vram_budget)
        avail = p->vram_budget > g->vram ? (p->vram_budget - g->vram < avail
                                                 ? p->vram_budget - g->vram
                                                 : avail)
                                         : 0;
    uint32_t n_full = layers_of_kind(c, false), n_slide = layers_of_kind(c, true);
    const bool fp8 = p->kv_fp8;
    uint64_t per_pos = kv_bytes_per_layer_position(c, fp8);
    uint64_t full_block = per_pos * B * n_full, slide_block = per_pos * B * n_slide;
    gpt_cuda_kv_layout *kv = &g->kv;
    kv->block_tokens = B;
    kv->window = n_slide ? c->window : 0;
    kv->window_blocks = n_slide ? g->rows * ((c->window + B - 1) / B + 2) + g->chunk / B + 1 : 0;
    kv->max_tokens = g->chunk;
    kv->max_rows = g->rows;
    kv->bytes_per_token = per_pos * c->layers;
    uint64_t slide_bytes = (uint64_t)kv->window_blocks * slide_block;
    uint32_t want_seqs = p->sequences ? p->sequences : 4;
    uint64_t full_bytes = p->kv_pool_bytes ? p->kv_pool_bytes
                                           : (uint64_t)want_seqs * ((g->context + B - 1) / B) * full_block;
    if (!n_full)
        full_bytes = 0;
    if (slide_bytes + full_bytes > avail)
        full_bytes = avail > slide_bytes ? avail - slide_bytes : 0;
    kv->full_blocks = n_full ? (uint32_t)(full_bytes / full_block) : 0;
    uint64_t min_blocks = (MIN_CONTEXT + B - 1) / B;
    if ((n_full && kv->full_blocks < min_blocks) || slide_bytes > avail) {
        set_err(err, "not enough VRAM for the KV cache: %llu MiB free after the weights, "
                     "%llu MiB needed for %u positions",
                (unsigned long long)(avail >> 20),
                (unsigned long long)((min_blocks * full_block + slide_bytes) >> 20), MIN_CONTEXT);
        return LLMR_OOM_VRAM;
    }
    if (n_full && (uint64_t)kv->full_blocks * B < g->context)
        g->context = kv->full_blocks * B;
    uint8_t *pool[2] = {NULL, NULL};
    uint64_t blocks[2] = {kv->full_blocks, kv->window_blocks};
    uint64_t bytes[2] = {(uint64_t)kv->full_blocks * full_block, slide_bytes};
    for (int w = 0; w < 2; w++)
        if (bytes[w] && (e = dalloc(g, reinterpret_cast<void **>(&pool[w]), bytes[w])) != cudaSuccess)
            return gpt_cuda_fail(err, "allocating the KV cache", e);
    /* a layer's part of its pool: K, V (values), then with fp8 K's and V's row scales */
    uint32_t seen[2] = {0, 0};
    for (uint32_t l = 0; l < c->layers; l++) {
        DevLayer *L = &g->layers[l];
        uint32_t w = L->which;
        uint64_t rows = blocks[w] * c->kv_heads * B;
        uint64_t values = rows * c->head_dim * (fp8 ? 1 : sizeof(kv_t));
        uint8_t *base = pool[w] + seen[w]++ * per_pos * B * blocks[w];
        L->kv.k = base;
        L->kv.v = base + values;
        L->kv.kscale = fp8 ? reinterpret_cast<float *>(base + 2 * values) : NULL;
        L->kv.vscale = fp8 ? L->kv.kscale + rows : NULL;
    }
    kv->fp8 = fp8;
    return LLMR_OK;
}

llmr_status gpt_cuda_load(const gpt_model *m, const gpt_cuda_params *p, gpt_cuda **out, char *err)
{
    *out = NULL;
    const gpt_config *c = &m->cfg;
    llmr_status st = check_shapes(c, err);
    if (st != LLMR_OK)
        return st;
    int count = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess || p->device < 0 || p->device >= count) {
        set_err(err, "no CUDA device %d (%d found%s%s)", p->device, e == cudaSuccess ? count : 0,
                e == cudaSuccess ? "" : ": ", e == cudaSuccess ? "" : cudaGetErrorString(e));
        return LLMR_UNSUPPORTED;
    }
    cudaDeviceProp prop;
    if ((e = cudaSetDevice(p->device)) != cudaSuccess ||
        (e = cudaGetDeviceProperties(&prop, p->device)) != cudaSuccess)
        return gpt_cuda_fail(err, "opening the GPU", e);
    if (prop.major < 8) {
        set_err(err, "%s has compute capability %d.%d; the CUDA path needs 8.0 or newer",
                prop.name, prop.major, prop.minor);
        return LLMR_UNSUPPORTED;
    }
    gpt_cuda *g = (gpt_cuda *)calloc(1, sizeof *g);
    DevLayer *layers = (DevLayer *)calloc(c->layers, sizeof *layers);
    if (!g || !layers) {
        free(g);
        free(layers);
        set_err(err, "out of memory");
        return LLMR_OOM_RAM;
    }
    g->layers = layers;
    g->cfg = *c;
    g->device = p->device;
    g->invariant = p->batch_invariant;
    snprintf(g->name, sizeof g->name, "%s", prop.name);
    g->sms = prop.multiProcessorCount;
    g->context = p->context && p->context < c->max_position ? p->context : c->max_position;
    g->chunk = g->context < GPT_CUDA_CHUNK ? g->context : GPT_CUDA_CHUNK;
    g->rows = logit_rows(g->chunk);

    Uploader u = {};
    u.g = g;
    u.pool = m->pool;
    u.progress = p->progress;
    u.user = p->user;
    u.total = upload_total(m);
    u.err = cudaStreamCreateWithFlags(&g->stream, cudaStreamNonBlocking);
    for (int i = 0; i < 2 && u.err == cudaSuccess; i++) {
        u.err = cudaMallocHost(&u.buf[i], STAGING_BYTES);
        if (u.err == cudaSuccess)
            u.err = cudaEventCreateWithFlags(&u.ev[i], cudaEventDisableTiming);
    }
    uint32_t range_init[2] = {255, 0};
    if (u.err == cudaSuccess)
        u.err = dalloc_n(g, &u.overflow, 1);
    if (u.err == cudaSuccess)
        u.err = dalloc_n(g, &u.scale_range, 2);
    if (u.err == cudaSuccess)
        u.err = cudaMemcpy(u.scale_range, range_init, sizeof range_init, cudaMemcpyHostToDevice);
    if (u.err == cudaSuccess)
        u.err = cudaMemset(u.overflow, 0, sizeof *u.overflow);
    if (u.err == cudaSuccess)
        u.err = dalloc_n(g, &g->embed, (size_t)c->vocab * c->hidden);
    if (u.err == cudaSuccess)
        up_matrix(&u, g->embed, &m->embed, false);
    for (uint32_t l = 0; l < c->layers && u.err == cudaSuccess; l++) {
        upload_layer(&u, &g->layers[l], &m->layers[l], c);
        bool sliding = c->sliding[l] && c->window;
        g->layers[l].window = sliding ? c->window : 0;
        g->layers[l].which = sliding ? 1 : 0;
    }
    up_floats(&u, &g->final_norm, m->final_norm, c->hidden);
    if (u.err == cudaSuccess)
        u.err = dalloc_n(g, &g->lm_head, (size_t)c->vocab * c->hidden);
    if (u.err == cudaSuccess)
        up_matrix(&u, g->lm_head, &m->lm_head, true);
    if (u.err == cudaSuccess)
        u.err = cudaStreamSynchronize(g->stream);
    for (int i = 0; i < 2; i++) {
        if (u.buf[i])
            cudaFreeHost(u.buf[i]);
        if (u.ev[i])
            cudaEventDestroy(u.ev[i]);
    }
    if (u.err != cudaSuccess) {
        st = gpt_cuda_fail(err, "uploading the weights", u.err);
        gpt_cuda_free(g);
        return st;
    }
    /* fp16 must hold every dense weight and every decoded expert value exactly enough:
     * E2M1 (0.5 to 6) times 2^(s-127) is exact in fp16 for s in [104, 140] */
    unsigned long long overflow = 0;
    uint32_t range[2] = {0, 0};
    e = cudaMemcpy(&overflow, u.overflow, sizeof overflow, cudaMemcpyDeviceToHost);
    if (e == cudaSuccess)
        e = cudaMemcpy(range, u.scale_range, sizeof range, cudaMemcpyDeviceToHost);
    if (e != cudaSuccess) {
        st = gpt_cuda_fail(err, "checking the weights' range", e);
        gpt_cuda_free(g);
        return st;
    }
    if (overflow || range[0] < 104 || range[1] > 140) {
        if (overflow)
            set_err(err, "%llu dense weights are beyond fp16's range (65504)", overflow);
        else
            set_err(err, "MXFP4 scales span 2^%d to 2^%d; the CUDA path decodes experts to "
                         "fp16, exact for 2^-23 to 2^13",
                    (int)range[0] - 127, (int)range[1] - 127);
        gpt_cuda_free(g);
        return LLMR_UNSUPPORTED;
    }
    e = make_rope_table(g, &m->rope);
    if (e == cudaSuccess)
        e = alloc_scratch(g);
    if (e == cudaSuccess)
        open_dense(g, p);
    if (e != cudaSuccess) {
        st = gpt_cuda_fail(err, "allocating tables and scratch", e);
        gpt_cuda_free(g);
        return st;
    }
    if (p->vram_budget && g->vram > p->vram_budget) {
        set_err(err, "the weights and scratch take %llu MiB, over the budget of %llu MiB",
                (unsigned long long)(g->vram >> 20), (unsigned long long)(p->vram_budget >> 20));
        gpt_cuda_free(g);
        return LLMR_OOM_VRAM;
    }
    st = make_kv(g, p, err);
    if (st == LLMR_OK)
        st = gpt_cuda_prepare(g, err);
    if (st != LLMR_OK) {
        gpt_cuda_free(g);
        return st;
    }
    *out = g;
    return LLMR_OK;
}

void gpt_cuda_free(gpt_cuda *g)
{
    if (!g)
        return;
    cudaSetDevice(g->device);
    if (g->stream)
        cudaStreamSynchronize(g->stream);
    if (g->graph1_ready) {
        cudaGraphExecDestroy(g->graph1[0]);
        cudaGraphExecDestroy(g->graph1[1]);
    }
    blas_gemm_close(g->blas);
    for (size_t i = 0; i < g->n_allocs; i++)
        cudaFree(g->allocs[i]);
    if (g->sb.h_in)
        cudaFreeHost(g->sb.h_in);
    if (g->sb.h_pout)
        cudaFreeHost(g->sb.h_pout);
    if (g->sb.h_pen)
        cudaFreeHost(g->sb.h_pen);
    if (g->sb.h_top)
        cudaFreeHost(g->sb.h_top);
    if (g->stream)
        cudaStreamDestroy(g->stream);
    free(g->allocs);
    free(g->layers);
    free(g);
}

uint64_t gpt_cuda_vram_bytes(const gpt_cuda *g)
{
    return g->vram;
}

uint32_t gpt_cuda_context(const gpt_cuda *g)
{
    return g->context;
}

void gpt_cuda_kv(const gpt_cuda *g, gpt_cuda_kv_layout *out)
{
    *out = g->kv;
}

const char *gpt_cuda_device_name(const gpt_cuda *g)
{
    return g ? g->name : "";
}

const char *gpt_cuda_dense_products(const gpt_cuda *g)
{
    return g ? g->dense_by : "";
}
