/* The kernels of the gpt-oss CUDA path and their launchers.  Activations are fp32 in
 * the residual stream.  Where they feed a matrix product on tensor cores they become
 * fp16 (10 bits of mantissa to bf16's 7), in one of two precisions:
 *   - the MoE block and lm_head take plain fp16 (normed or clamped-SwiGLU values);
 *   - the attention block (QKV projection, scores, P V, output projection) takes
 *     split fp16: x = hi + lo, hi = fp16(x), lo = fp16(x - hi), about 21 bits, as two
 *     operands (two or three mma per product).  Its fp16 roundings are what flip the
 *     routers' near-ties downstream (docs/correctness.md), so it keeps fp32's precision.
 * The dense weights are converted from bf16 to fp16 at load (exact within fp16's
 * range), the MXFP4 experts stay MXFP4 and are decoded to fp16 inside the kernels; the
 * KV cache is bf16 (paged, below).  The embedding table stays bf16.  Every launcher takes a stream and
 * returns the launch's error.
 *
 * Layouts: a matrix [rows][cols] is row-major; activations are [tokens][width];
 * MXFP4 weights are blocks [rows][cols/32][16] and scales [rows][cols/32], the blocks of
 * every kernel here laid out as k_mxfp4_lay_out leaves them. */
#ifndef GPT_CUDA_KERNELS_CUH
#define GPT_CUDA_KERNELS_CUH

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdint.h>

/* Experts the router and grouping kernels take at most (gpt-oss-120b has 128). */
#define GPT_MAX_EXPERTS 128u

typedef __nv_bfloat16 bf16;
typedef __half f16;

/* fp16 with saturation: beyond +-65504 stays at the largest finite value. */
static __device__ __forceinline__ f16 to_f16(float x)
{
    return __float2half_rn(fminf(fmaxf(x, -65504.0f), 65504.0f));
}

/* x as split fp16 (see above): hi = fp16(x), lo = fp16(x - hi). */
static __device__ __forceinline__ void split_f16(float x, f16 *hi, f16 *lo)
{
    f16 h = to_f16(x);
    *hi = h;
    *lo = to_f16(x - __half2float(h));
}

/* ---- the step of many sequences: the paged KV cache ------------------------------------
 * The KV cache of the step path is a pool of blocks of `block_tokens` positions per kind
 * of layer (full attention, sliding window), 16-bit, per layer [block][kv_head][block
 * position][head_dim] for K and again for V.  A sequence's block table (the scheduler's,
 * engines/sched) maps its position p to block table[p / block_tokens].
 *
 * The 16 bits are fp16, not bf16: the same capacity with 3 more bits of mantissa.  With
 * bf16 the 2-layer preset's logits were 100 times further from fp32 (relative L2 2.1e-2,
 * top-1 97.7% of 300 positions; docs/batching.md).  Keys and values are normed
 * projections, far inside fp16's range; a value beyond it saturates (to_f16).
 *
 * With the load option "kv_dtype": "fp8" the cache holds 8 bits a value instead: fp8
 * e4m3 (OCP's format: 4 exponent bits, 3 of mantissa, at most 448) with one fp32 scale
 * per key (and per value) row of a KV head, amax / 448 of that row, so a row keeps its
 * own range; 1.9 times the positions in the same bytes. */
#define GPT_KV_NO_BLOCK 0xffffffffu
typedef f16 kv_t;
#define GPT_KV_FP8_MAX 448.0f

/* One layer's paged cache: K and V, each [block][kv_head][block position][head_dim], fp16
 * (kv_t) when kscale is NULL, else fp8 e4m3 bytes with the rows' scales in kscale and
 * vscale, [block][kv_head][block position]. */
struct KvCache {
    void *k, *v;
    float *kscale, *vscale;
};

/* One token of a step, as the step's kernels read it (device memory). */
struct StepToken {
    uint32_t pos;      /* its position in its sequence */
    uint32_t table[2]; /* where its sequence's block tables start in the step's tables:
                          [0] the full-attention pool's, [1] the sliding pool's */
    uint32_t slot[2];  /* where its key and value go in each pool:
                          block * block_tokens + pos % block_tokens */
};

/* RoPE for T tokens at tok[t].pos: q and k of the fp32 qkv rows [q | k | v] rotated in
 * place with the table cos_sin [positions][hd/2] (cos, sin already scaled by the
 * attention factor); then each token's k and v stored (fp16, or fp8 with their rows'
 * scales) at tok[t].slot[which] of the layer's cache. */
cudaError_t k_rope_kv_paged(float *qkv, KvCache kv, const StepToken *tok, uint32_t which,
                            const float2 *cos_sin, uint32_t T, uint32_t heads, uint32_t kv_heads,
                            uint32_t hd, uint32_t block_tokens, cudaStream_t s);
/* Attention of T tokens (the q parts of qkv rows) over their sequences' cached keys and
 * values at positions up to their own (the last `window` on sliding layers; 0: all), read
 * through the block tables (tables + tok[t].table[which]), with a sink per head.  out:
 * [T][heads*hd] as split fp16 (out_hi + out_lo) and/or fp32 (out_f).  The keys are split
 * over `splits` blocks per token and head; with splits > 1, scratch holds
 * k_attention_paged_scratch_floats(T * splits, heads, hd). */
cudaError_t k_attention_paged(f16 *out_hi, f16 *out_lo, float *out_f, float *scratch,
                              const float *qkv, KvCache kv,
                              const StepToken *tok, const uint32_t *tables, uint32_t which,
                              const float *sinks, uint32_t T, uint32_t heads, uint32_t kv_heads,
                              uint32_t hd, uint32_t block_tokens, uint32_t window,
                              uint32_t splits, cudaStream_t s);
size_t k_attention_paged_scratch_floats(uint32_t rows, uint32_t heads, uint32_t hd);

/* How one row of a step is picked (device memory): temperature <= 0 is greedy; else a
 * draw from softmax(logits / temperature) over the tokens top_k, top_p and min_p keep,
 * as the CPU sampler filters (sampler.h; top_k 0 or >= vocab, top_p <= 0 or >= 1 and
 * min_p <= 0 are off). */
struct PickRow {
    float temperature;
    uint32_t top_k;
    uint64_t seed;
    uint64_t step; /* draws so far: keys the noise with the seed */
    float top_p, min_p;
    /* the penalties (k_apply_penalties), over the row's entries pen[pen_first..+pen_count) */
    uint32_t pen_first, pen_count;
    float repetition, presence, frequency;
    uint32_t top_logprobs; /* alternatives k_top_logprobs gathers (0..GPT_TOP_MAX) */
};
#define GPT_TOP_MAX 20
/* One of a row's most likely tokens (k_top_logprobs): its id and logit. */
struct TopEntry {
    int32_t id;
    float logit;
};
/* A token a request has seen: in its prompt (count 0, for the repetition penalty) or
 * generated `count` times. */
struct PenEntry {
    int32_t id;
    uint32_t count;
};
struct PickOut {
    int32_t id;
    float logprob; /* log-softmax at temperature 1 */
    float max, lse; /* the row's largest logit and log(sum of exp(logit - max)): a token's
                       log-softmax is logit - max - lse */
};
/* Where a row's filters cut the order of its tokens (logit descending, id ascending):
 * a token is kept when its logit is above t, or equal to t with an id up to id_max. */
struct PickCut {
    float t;
    int32_t id_max;
};
/* out[r] from logits [R][vocab] with rows[r]: with cuts, the filters' cuts first
 * (k_pick_cuts; without, every row keeps every number: greedy or temperature alone),
 * then the draw (k_sample.cu).  scratch: k_pick_rows_scratch_bytes(R) of device memory. */
cudaError_t k_pick_rows(PickOut *out, const PickRow *rows, const float *logits, uint32_t R,
                        uint32_t vocab, void *scratch, bool cuts, cudaStream_t s);
size_t k_pick_rows_scratch_bytes(uint32_t rows);
/* out[r * GPT_TOP_MAX + i], i < counts[r]: the rows[r].top_logprobs most likely tokens of
 * logits row r (logit descending, ties to the lower id, as the CPU sampler's
 * top_logprobs; non-finite logits left out), in no order: the cut of a top_k filter
 * (k_pick_cuts), then the tokens it keeps.  Rows with top_logprobs 0 get none.
 * scratch: k_top_logprobs_scratch_bytes(R). */
cudaError_t k_top_logprobs(TopEntry *out, uint32_t *counts, const PickRow *rows, const float *logits,
                           uint32_t R, uint32_t vocab, void *scratch, cudaStream_t s);
size_t k_top_logprobs_scratch_bytes(uint32_t R);
/* The CPU sampler's penalties (sampler.h), in its order and arithmetic, on logits row r
 * for each of rows[r]'s entries: a repetition penalty divides a positive logit and
 * multiplies a negative one; a generated token then loses frequency * count and presence
 * (vLLM's order).  Rows without entries are left alone. */
cudaError_t k_apply_penalties(float *logits, const PickRow *rows, const PenEntry *pen, uint32_t R,
                              uint32_t vocab, cudaStream_t s);
/* cuts[r] of rows[r]'s top_k, top_p and min_p over logits row r (k_pick_cut.cu): each
 * row's vocabulary in slices, a block each, about 22 launches; a greedy row or one
 * without filters gets {-inf, -1} (every number).  scratch: k_pick_cuts_scratch_bytes(R). */
cudaError_t k_pick_cuts(PickCut *cuts, const PickRow *rows, const float *logits, uint32_t R,
                        uint32_t vocab, void *scratch, cudaStream_t s);
size_t k_pick_cuts_scratch_bytes(uint32_t R);
/* x[r][:] = src[rows[r]][:] for r < R (the rows of a step whose logits are wanted). */
cudaError_t k_gather_rows(float *x, const float *src, const int32_t *rows, uint32_t R, uint32_t H,
                          cudaStream_t s);

/* ---- elementwise and small ------------------------------------------------------- */

/* bf16 -> fp16 in place over n values (the dense weights at load); values beyond
 * fp16's range saturate and are counted into *overflow (may be NULL). */
cudaError_t k_bf16_to_f16(void *p, size_t n, unsigned long long *overflow, cudaStream_t s);
/* lo_hi[0] = min(lo_hi[0], min of p), lo_hi[1] = max(lo_hi[1], max of p) (the MXFP4
 * scales' range at load). */
cudaError_t k_byte_range(const uint8_t *p, size_t n, uint32_t *lo_hi, cudaStream_t s);
/* The experts' MXFP4 blocks as the GPU keeps them (k_mxfp4_lay_out, in place at load):
 * each group of 32 values (16 bytes, byte j holding values 2j and 2j + 1 in its low and
 * high nibble) becomes four words, word i gathering bytes i, i + 4, i + 8, i + 12, so
 * that its nibbles 0-7 are values 2i, 2i + 1, 2i + 8, 2i + 9, 2i + 16, 2i + 17, 2i + 24,
 * 2i + 25: the values that lane i of a quad holds in the A fragments of the group's two
 * k16 steps (mma.sync and wgmma), which it now reads as one word.  Within a word, the
 * magnitude of nibble n stays in its bits 0-2, and the sign bits (bit 3 of each nibble)
 * are exchanged: nibble n < 4's sign goes to bit 8n + 7, nibble 4 + n's to 8n + 3, so
 * that the decode takes the signs of a lookup's four bytes by one mask
 * (e2m1x8_to_half2_pairs, device_util.cuh).  A host function for the tests. */
static __host__ __device__ __forceinline__ uint32_t mxfp4_laid_word(const uint8_t group[16], uint32_t i)
{
    const uint32_t w = (uint32_t)group[i] | (uint32_t)group[i + 4] << 8 | (uint32_t)group[i + 8] << 16 |
                       (uint32_t)group[i + 12] << 24;
    uint32_t laid = w & 0x77777777u;
    for (uint32_t n = 0; n < 8; n++)
        laid |= (w >> (4 * n + 3) & 1u) << (n < 4 ? 8 * n + 7 : 8 * (n - 4) + 3);
    return laid;
}
/* `groups` groups of blocks (16 bytes each, 16-byte aligned: else
 * cudaErrorInvalidValue) into that layout, in place. */
cudaError_t k_mxfp4_lay_out(uint8_t *blocks, size_t groups, cudaStream_t s);
/* x[t][:] = embed[ids[t]][:] as fp32. */
cudaError_t k_embed(float *x, const bf16 *embed, const int32_t *ids, uint32_t T, uint32_t H,
                    cudaStream_t s);
/* out[t] = x[t] / rms(x[t]) * w, as fp16 (out_h; with out_lo, split fp16: out_h the
 * hi part, out_lo the lo) and/or fp32 (out_f); any may be NULL. */
cudaError_t k_rmsnorm(f16 *out_h, f16 *out_lo, float *out_f, const float *x, const float *w,
                      uint32_t T, uint32_t H, float eps, cudaStream_t s);
/* The same with out_h (not NULL) in the operand order (mx_operand_index, each row by
 * groups of 32: the input of GPT_MOE_TILE_FRAGMENTS16_OPERAND), out_f as it is.
 * H % 32 == 0. */
cudaError_t k_rmsnorm_operand_order(f16 *out_h, float *out_f, const float *x, const float *w, uint32_t T,
                                    uint32_t H, float eps, cudaStream_t s);
/* The RoPE table: cos_sin[pos][i] = (cos, sin)(pos * inv_freq[i]) * attn_factor for
 * pos < positions, i < half, computed in double (inv_freq: device, half doubles). */
cudaError_t k_rope_table(float2 *cos_sin, const double *inv_freq, double attn_factor,
                         uint32_t positions, uint32_t half, cudaStream_t s);
/* Router: logits[t][e] = w[e] . xn[t] + b[e] (xn fp32); the top-k ids (ties to the
 * lower id) and their softmax. */
cudaError_t k_router(int32_t *ids, float *weights, const float *xn, const f16 *w, const float *b,
                     uint32_t T, uint32_t H, uint32_t E, uint32_t k, cudaStream_t s);
/* The MLP's norm and the router in one launch (k_moe_route.cu): out_f = k_rmsnorm's fp32
 * of x with norm_w, out_h (may be NULL but in the operand order) its fp16, in the
 * operand order when asked (k_rmsnorm_operand_order), then k_router over out_f; the
 * same bits as those kernels give. */
cudaError_t k_rmsnorm_router(f16 *out_h, float *out_f, bool operand_order, const float *x, const float *norm_w,
                             float eps, int32_t *ids, float *weights, const f16 *w, const float *b, uint32_t T,
                             uint32_t H, uint32_t E, uint32_t k, cudaStream_t s);
/* The decode step's router, one launch: x (fp32 [H]) normed with norm_w (eps), the
 * logits w . xn + b of the E experts, their top k (ids, softmax weights) as k_router
 * picks them; xn is also written to x_operand as fp16 in the operand order (below), the
 * input of k_moe_gate_up_gemv.  H % 32 == 0. */
cudaError_t k_router_decode(int32_t *ids, float *weights, f16 *x_operand, const float *x,
                            const float *norm_w, float eps, const f16 *w, const float *b,
                            uint32_t H, uint32_t E, uint32_t k, cudaStream_t s);
/* x[t][h] += sum_j w[t][j] * out[slot[t][j]][h] (the experts' outputs, in a fixed order). */
cudaError_t k_moe_combine(float *x, const float *out, const int32_t *slot, const float *w,
                          uint32_t T, uint32_t k, uint32_t H, cudaStream_t s);
/* k_moe_combine, then out_h + out_lo = k_rmsnorm's split fp16 of the new x with norm_w
 * (the next layer's attention norm), bit for bit as the two kernels give it, in one
 * launch (k_norm.cu). */
cudaError_t k_moe_combine_rmsnorm(float *x, const float *out, const int32_t *slot, const float *w, uint32_t T,
                                  uint32_t k, uint32_t H, f16 *out_h, f16 *out_lo, const float *norm_w, float eps,
                                  cudaStream_t s);
/* Groups the T*k (token, expert) pairs by expert: counts[E], offsets[E+1], the token of
 * every slot (rows[slot]) and the slot of every pair (slot_of[t*k+j]). */
cudaError_t k_moe_group(int32_t *rows, int32_t *slot_of, uint32_t *counts, uint32_t *offsets,
                        const int32_t *ids, uint32_t T, uint32_t k, uint32_t E, cudaStream_t s);
/* ---- matrix-vector products (decode) ----------------------------------------------- */
/* Their vectors (x, act) and norm weights must be 16-byte aligned (every buffer the
 * engine allocates is); otherwise they return cudaErrorInvalidValue. */

/* y[r] = W[r] . x + b[r] (+ y[r] when accumulate), x fp32 [cols]; W f16 [rows][cols].
 * With norm_w, x is RMSNorm(x) * norm_w first (as k_rmsnorm, eps). */
cudaError_t k_gemv_f16(float *y, const f16 *W, const float *b, const float *x,
                       const float *norm_w, float eps, uint32_t rows, uint32_t cols,
                       int accumulate, cudaStream_t s);

/* The operand order of the experts' GEMVs' fp16 vectors (k_gemv.cu) and of the
 * fragments kernel's tokens (GPT_MOE_TILE_FRAGMENTS16_OPERAND): within each group of
 * 32, value 8j + 2i + q (q 0 or 1) at 8i + 2j + q, so that the 8 values of the group's
 * laid-out word i (k_mxfp4_lay_out above) are one 16-byte run, in the order its pairs
 * decode. */
static __host__ __device__ __forceinline__ uint32_t mx_operand_index(uint32_t v)
{
    return (v & ~31u) | (v & 1u) | ((v >> 3 & 3u) << 1) | ((v >> 1 & 3u) << 3);
}

/* For the k experts of ids: act[j][i] = the clamped SwiGLU of rows 2i, 2i+1 of expert
 * ids[j]'s gate_up (MXFP4 [E][2I][H]) . x + bias, written as fp16 [k][I], each row in
 * the operand order (the input of k_moe_down_gemv); x fp16 [H] in the operand order.
 * H % 32 == 0, I % 32 == 0. */
cudaError_t k_moe_gate_up_gemv(f16 *act, const uint8_t *blocks, const uint8_t *scales,
                               const float *bias, const int32_t *ids, const f16 *x, uint32_t k,
                               uint32_t H, uint32_t I, float alpha, float limit, cudaStream_t s);
/* x[h] += sum_j w[j] * (down[ids[j]][h] . act[j] + bias[ids[j]][h]), act as
 * k_moe_gate_up_gemv writes it.  scratch: k_moe_down_scratch_bytes(k, H) of device
 * memory, zeroed before the first launch (each launch leaves it zeroed where it
 * matters: its per-tile counters).  The sum over j is in a fixed order. */
cudaError_t k_moe_down_gemv(float *x, const uint8_t *blocks, const uint8_t *scales,
                            const float *bias, const int32_t *ids, const float *w,
                            const f16 *act, void *scratch, uint32_t k, uint32_t H, uint32_t I,
                            cudaStream_t s);
size_t k_moe_down_scratch_bytes(uint32_t k, uint32_t H);

/* ---- matrix products (prefill) ------------------------------------------------------ */

/* C fp32 [M][N] = A [M][K] . B f16 [N][K]^T + bias[N] (bias may be NULL; C += when
 * accumulate), A f16, or split fp16 when A_lo is not NULL (A + A_lo: two products).
 * Tensor cores (mma.sync f16, fp32 accumulation); K % 32 == 0, N % 8 == 0.
 * split_scratch (may be NULL): k_gemm_split_scratch_bytes(M, N) of device memory, with
 * which a product of few rows splits K over more blocks (summed in a fixed order); that
 * of M rows is enough for any product of at most M rows, here or in k_gemm_f16_wgmma. */
cudaError_t k_gemm_f16(float *C, const f16 *A, const f16 *A_lo, const f16 *B, const float *bias,
                       uint32_t M, uint32_t N, uint32_t K, int accumulate, float *split_scratch,
                       cudaStream_t s);
size_t k_gemm_split_scratch_bytes(uint32_t M, uint32_t N);
/* The same with the large tile named (for the kernel check and the step bench): 0 the
 * choice k_gemm_f16 makes, GPT_GEMM_TILE_LARGE8 the 128x128 tile of 8 warps (64x32 each)
 * in its place where the choice is the large tile (the tile k_gemm_f16 took before its 4
 * warps of 64x64).  Another value is cudaErrorInvalidValue. */
#define GPT_GEMM_TILE_LARGE8 1u
cudaError_t k_gemm_f16_tile(uint32_t tile, float *C, const f16 *A, const f16 *A_lo, const f16 *B,
                            const float *bias, uint32_t M, uint32_t N, uint32_t K, int accumulate,
                            float *split_scratch, cudaStream_t s);
/* The same in a shape named (for the step bench and the kernel check): tiles of bm rows
 * (32, 64 or 128) and K split into `splits` parts (1 to GPT_GEMM_SPLITS_MAX; more than one
 * needs a split_scratch of splits * M * N floats).  A shape that cannot run is
 * cudaErrorInvalidValue. */
#define GPT_GEMM_SPLITS_MAX 8u
cudaError_t k_gemm_f16_shape(uint32_t bm, uint32_t splits, float *C, const f16 *A, const f16 *A_lo,
                             const f16 *B, const float *bias, uint32_t M, uint32_t N, uint32_t K,
                             int accumulate, float *split_scratch, cudaStream_t s);
/* C[m][n] = the sum over z < splits of parts[z][m][n], in order, + bias[n] (may be NULL),
 * onto C when accumulate: the end of a product whose K was split. */
cudaError_t k_gemm_sum_parts(float *C, const float *parts, const float *bias, uint32_t M, uint32_t N,
                             uint32_t splits, int accumulate, cudaStream_t s);
/* k_gemm_f16's product for a step of few rows (M <= 64) on Hopper's warpgroup matrix
 * instructions (k_gemm_wgmma.cu): K % 64 == 0, N % 8 == 0.  K in `splits` parts (0: the
 * kernel's pick when a split_scratch is given, else 1; at most GPT_GEMM_WGMMA_SPLITS_MAX,
 * more than one needs splits * M * N floats of scratch, which k_gemm_split_scratch_bytes
 * of M or more rows covers for the pick).  cudaErrorNotSupported but where k_wgmma_available() says yes;
 * other shapes are cudaErrorInvalidValue.  Its order of sums depends on the rows (the
 * products' width): the batch-invariant option keeps to k_gemm_f16. */
#define GPT_GEMM_WGMMA_SPLITS_MAX 16u
cudaError_t k_gemm_f16_wgmma(uint32_t splits, float *C, const f16 *A, const f16 *A_lo, const f16 *B,
                             const float *bias, uint32_t M, uint32_t N, uint32_t K, int accumulate,
                             float *split_scratch, cudaStream_t s);
/* The experts' products, grouped: for expert e, the slots offsets[e]..offsets[e+1],
 * whose A rows are A[a_rows[slot]] (or A[slot] when a_rows is NULL), times expert e's
 * MXFP4 matrix [N][K] (blocks + e * N * K/2, scales + e * N * K/32), plus its bias
 * (bias + e * N).  MXFP4 is decoded on chip (shared memory or registers), never to
 * global memory.  Either C fp32 [slots][N], or, with act, the clamped SwiGLU of each
 * (gate, up) column pair: act f16 [slots][N/2].  max_rows bounds every expert's slots
 * (the grid is sized by it; blocks past an expert's count exit at once); pairs is the
 * slots in all (offsets[E]), whose mean per expert picks the tile's rows
 * (k_gemm_mxfp4.cu).  K % 64 == 0, N % 8 == 0. */
cudaError_t k_gemm_mxfp4_grouped(float *C, f16 *act, const f16 *A, const int32_t *a_rows,
                                 const uint8_t *blocks, const uint8_t *scales, const float *bias,
                                 const uint32_t *offsets, uint32_t E, uint32_t max_rows,
                                 uint32_t pairs, uint32_t N, uint32_t K, float alpha, float limit,
                                 cudaStream_t s);
/* The same with the tile named instead of chosen (for the kernel check and the step
 * bench): GPT_MOE_TILE_FRAGMENTS16 and ..32 are k_moe_gemm_few with 16 or 32 token rows
 * a block, GPT_MOE_TILE_WGMMA64 and ..128 k_moe_gemm_wgmma with 64 or 128 (compute
 * capability 9.0 only: cudaErrorNotSupported elsewhere), 32, 64 and 128 the rows of a
 * block's tile of the grouped GEMM, 0 the choice k_gemm_mxfp4_grouped makes.  Another
 * value is cudaErrorInvalidValue. */
#define GPT_MOE_TILE_FRAGMENTS16 16u
#define GPT_MOE_TILE_FRAGMENTS32 17u
#define GPT_MOE_TILE_WGMMA64 18u
#define GPT_MOE_TILE_WGMMA128 19u
/* GPT_MOE_TILE_FRAGMENTS16 with the tokens A in the operand order (mx_operand_index,
 * each row by groups of 32; K % 32 == 0) and act, where written, in that order too (N/2
 * % 32 == 0): the order in which the laid-out words' values lie, so the fragments kernel
 * reads a token's values of a word as one 16-byte run.  A step whose pick is the
 * fragments kernel for both products (k_gemm_mxfp4_grouped_pick) gives it the MLP's
 * normed rows that way (k_rmsnorm_operand_order). */
#define GPT_MOE_TILE_FRAGMENTS16_OPERAND 20u
cudaError_t k_gemm_mxfp4_grouped_tile(uint32_t tile, float *C, f16 *act, const f16 *A,
                                      const int32_t *a_rows, const uint8_t *blocks,
                                      const uint8_t *scales, const float *bias,
                                      const uint32_t *offsets, uint32_t E, uint32_t max_rows,
                                      uint32_t pairs, uint32_t N, uint32_t K, float alpha,
                                      float limit, cudaStream_t s);
/* The tile k_gemm_mxfp4_grouped picks for those arguments on the current device. */
uint32_t k_gemm_mxfp4_grouped_pick(uint32_t E, uint32_t max_rows, uint32_t pairs, uint32_t N, uint32_t K);
/* The same products where the experts have a few rows each (up to 12 on compute
 * capability 9.0, where k_moe_gemm_wgmma takes more, else about 24), the weights
 * decoded straight into the tensor cores' fragments (k_moe_gemm.cu), token_rows (16 or
 * 32) of an expert a block; k_gemm_mxfp4_grouped calls it when that pays.  N % 16 == 0,
 * K % 64 == 0 (K % 320 == 0 for 32 token rows).  operand_order: A (and act) in the
 * operand order (GPT_MOE_TILE_FRAGMENTS16_OPERAND), 16 token rows only, N/2 % 32 == 0
 * when act is written. */
cudaError_t k_moe_gemm_few(uint32_t token_rows, float *C, f16 *act, const f16 *A,
                           const int32_t *a_rows, const uint8_t *blocks, const uint8_t *scales,
                           const float *bias, const uint32_t *offsets, uint32_t E,
                           uint32_t max_rows, uint32_t N, uint32_t K, float alpha, float limit,
                           bool operand_order, cudaStream_t s);
/* The same on Hopper's warpgroup matrix instructions (k_moe_wgmma.cu), token_rows (64 or
 * 128) of an expert a block; cudaErrorNotSupported but on compute capability 9.0, which
 * k_wgmma_available() tells.  N % 16 == 0, K % 64 == 0, K <= 12288; other shapes
 * are cudaErrorInvalidValue.  k_e2m1_scaled_tables_check (for the kernel check) counts
 * into *mismatches (device memory) the sampled words whose decode with the scale folded
 * into the tables (s in [114, 140]) differs from the decode times the scale. */
bool k_wgmma_available(void);
cudaError_t k_moe_gemm_wgmma(uint32_t token_rows, float *C, f16 *act, const f16 *A,
                             const int32_t *a_rows, const uint8_t *blocks, const uint8_t *scales,
                             const float *bias, const uint32_t *offsets, uint32_t E,
                             uint32_t max_rows, uint32_t N, uint32_t K, float alpha, float limit,
                             cudaStream_t s);
cudaError_t k_e2m1_scaled_tables_check(uint32_t *mismatches);

#endif
