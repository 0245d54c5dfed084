/* The experts' routing for a step of many tokens: the router (its products and top-k;
 * alone, or after the MLP's RMSNorm in the same kernel), grouping the (token, expert)
 * pairs by expert, and the weighted sum of the experts' outputs.  The one-token step's
 * router is a GEMV (k_gemv.cu).  See kernels.cuh. */
#include "device_util.cuh"
#include "norm_row.cuh"

/* ---- the router ------------------------------------------------------------------------- */

/* Token t's router by a block: a warp per expert (up to four when E > 32; warps past E
 * idle); 16-byte loads of the router's fp16 rows against the token's normed input in
 * fp32 (so the choice of experts does not hang on fp16 rounding); then one warp picks
 * the top k.  Each expert's sum is the same whatever the block's size. */
static __device__ __forceinline__ void router_row(int32_t *ids, float *weights, const float *xn, const f16 *w,
                                                  const float *b, uint32_t H, uint32_t E, uint32_t k,
                                                  uint32_t t)
{
    __shared__ float logits[GPT_MAX_EXPERTS];
    uint32_t warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const float4 *x4 = reinterpret_cast<const float4 *>(xn + (size_t)t * H);
    const uint32_t nw = blockDim.x >> 5;
    /* the warp's experts (w, w + nw, ...: E <= 8 nw) at once, so their loads overlap */
    float acc[8];
    const uint4 *we[8];
#pragma unroll
    for (int j = 0; j < 8; j++) {
        uint32_t e = warp + j * nw;
        acc[j] = 0;
        we[j] = reinterpret_cast<const uint4 *>(w + (size_t)(e < E ? e : 0) * H);
    }
    for (uint32_t c = lane; c < H / 8; c += 32) {
        float4 xa = x4[2 * c], xb = x4[2 * c + 1];
#pragma unroll
        for (int j = 0; j < 8; j++) {
            if (warp + j * nw >= E)
                break;
            uint4 u = __ldg(we[j] + c);
            const __half2 *h = reinterpret_cast<const __half2 *>(&u);
            float2 f0 = __half22float2(h[0]), f1 = __half22float2(h[1]), f2 = __half22float2(h[2]),
                   f3 = __half22float2(h[3]);
            acc[j] += f0.x * xa.x + f0.y * xa.y + f1.x * xa.z + f1.y * xa.w + f2.x * xb.x +
                      f2.y * xb.y + f3.x * xb.z + f3.y * xb.w;
        }
    }
#pragma unroll
    for (int j = 0; j < 8; j++) {
        uint32_t e = warp + j * nw;
        float v = warp_sum(acc[j]);
        if (lane == 0 && e < E)
            logits[e] = v + b[e];
    }
    __syncthreads();
    if (warp == 0)
        warp_topk(ids + (size_t)t * k, weights + (size_t)t * k, logits, E, k);
}

/* One block per token */
__global__ void __launch_bounds__(1024) router_kernel(int32_t *ids, float *weights, const float *xn,
                                                     const f16 *w, const float *b, uint32_t H,
                                                     uint32_t E, uint32_t k)
{
    grid_wait(); /* see launch() in device_util.cuh */
    grid_launch_next();
    router_row(ids, weights, xn, w, b, H, E, k, blockIdx.x);
}

/* One block per token: its RMSNorm by the first NORM_THREADS threads (k_rmsnorm's), then
 * its router over the fp32 norm the block just wrote (the barrier makes it visible). */
#define NORM_THREADS 512u
__global__ void __launch_bounds__(1024) rmsnorm_router_kernel(f16 *out_h, float *out_f, const float *x,
                                                              const float *norm_w, float eps, bool operand_order,
                                                              int32_t *ids, float *weights, const f16 *w,
                                                              const float *b, uint32_t H, uint32_t E, uint32_t k)
{
    grid_wait(); /* see launch() in device_util.cuh */
    grid_launch_next();
    const uint32_t t = blockIdx.x;
    rmsnorm_row(out_h, NULL, out_f, x + (size_t)t * H, norm_w, t, H, eps, operand_order, NORM_THREADS);
    __syncthreads();
    router_row(ids, weights, out_f, w, b, H, E, k, t);
}

static bool router_shape(uint32_t H, uint32_t E, uint32_t k)
{
    return E <= GPT_MAX_EXPERTS && k <= 8 && k <= E && H % 8 == 0;
}

cudaError_t k_router(int32_t *ids, float *weights, const float *xn, const f16 *w, const float *b,
                     uint32_t T, uint32_t H, uint32_t E, uint32_t k, cudaStream_t s)
{
    if (!router_shape(H, E, k))
        return cudaErrorInvalidValue;
    LAUNCH(router_kernel, T, 32 * min(E, 32u), 0, s, ids, weights, xn, w, b, H, E, k);
    return cudaGetLastError();
}

cudaError_t k_rmsnorm_router(f16 *out_h, float *out_f, bool operand_order, const float *x, const float *norm_w,
                             float eps, int32_t *ids, float *weights, const f16 *w, const float *b, uint32_t T,
                             uint32_t H, uint32_t E, uint32_t k, cudaStream_t s)
{
    if (!router_shape(H, E, k) || !out_f || (operand_order && (!out_h || H % 32)))
        return cudaErrorInvalidValue;
    LAUNCH(rmsnorm_router_kernel, T, max(NORM_THREADS, 32 * min(E, 32u)), 0, s, out_h, out_f, x, norm_w, eps,
           operand_order, ids, weights, w, b, H, E, k);
    return cudaGetLastError();
}

/* ---- grouping, combining ------------------------------------------------------------------ */

/* One block of 1024 threads: count per expert, scan, then place the pairs 1024 at a
 * time, stably (within an expert the pairs keep their order, so runs are repeatable):
 * a pair's place is its expert's offset, the pairs of that expert in earlier rounds,
 * in earlier warps of this round, and in earlier lanes of its warp (__match_any_sync). */
#define GROUP_THREADS 1024u

__global__ void __launch_bounds__(GROUP_THREADS) moe_group_kernel(int32_t *rows, int32_t *slot_of,
                                                                  uint32_t *counts,
                                                                  uint32_t *offsets,
                                                                  const int32_t *ids,
                                                                  uint32_t pairs, uint32_t k,
                                                                  uint32_t E)
{
    grid_wait(); /* see launch() in device_util.cuh */
    grid_launch_next();
    __shared__ uint32_t cnt[GPT_MAX_EXPERTS], base[GPT_MAX_EXPERTS];
    __shared__ uint16_t in_warp[GROUP_THREADS / 32][GPT_MAX_EXPERTS];
    const uint32_t tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
    for (uint32_t e = tid; e < E; e += blockDim.x)
        cnt[e] = 0;
    __syncthreads();
    for (uint32_t p = tid; p < pairs; p += blockDim.x)
        atomicAdd(&cnt[ids[p]], 1u);
    __syncthreads();
    if (tid == 0) {
        uint32_t at = 0;
        for (uint32_t e = 0; e < E; e++) {
            counts[e] = cnt[e];
            offsets[e] = at;
            base[e] = at;
            at += cnt[e];
        }
        offsets[E] = at;
    }
    const uint32_t below = (1u << lane) - 1u;
    for (uint32_t p0 = 0; p0 < pairs; p0 += blockDim.x) {
        __syncthreads(); /* base is written (first round) or updated (later ones) */
        for (uint32_t i = tid; i < (GROUP_THREADS / 32) * GPT_MAX_EXPERTS; i += blockDim.x)
            in_warp[i / GPT_MAX_EXPERTS][i % GPT_MAX_EXPERTS] = 0;
        __syncthreads();
        uint32_t p = p0 + tid;
        bool valid = p < pairs;
        uint32_t e = valid ? (uint32_t)ids[p] : GPT_MAX_EXPERTS + lane; /* invalid lanes match no one */
        uint32_t same = __match_any_sync(0xffffffffu, e);
        if (valid && (same & below) == 0) /* the first lane of its expert in this warp */
            in_warp[warp][e] = (uint16_t)__popc(same);
        __syncthreads();
        if (valid) {
            uint32_t place = base[e] + __popc(same & below);
            for (uint32_t w = 0; w < warp; w++)
                place += in_warp[w][e];
            rows[place] = (int32_t)(p / k);
            slot_of[p] = (int32_t)place;
        }
        __syncthreads(); /* every thread has read base and in_warp */
        for (uint32_t e2 = tid; e2 < E; e2 += blockDim.x) {
            uint32_t add = 0;
            for (uint32_t w = 0; w < GROUP_THREADS / 32; w++)
                add += in_warp[w][e2];
            base[e2] += add;
        }
    }
}

cudaError_t k_moe_group(int32_t *rows, int32_t *slot_of, uint32_t *counts, uint32_t *offsets,
                        const int32_t *ids, uint32_t T, uint32_t k, uint32_t E, cudaStream_t s)
{
    if (E > GPT_MAX_EXPERTS)
        return cudaErrorInvalidValue;
    LAUNCH(moe_group_kernel, 1, GROUP_THREADS, 0, s, rows, slot_of, counts, offsets, ids, T * k, k, E);
    return cudaGetLastError();
}

__global__ void moe_combine_kernel(float *x, const float *out, const int32_t *slot,
                                   const float *w, uint32_t k, uint32_t H)
{
    grid_wait(); /* see launch() in device_util.cuh */
    grid_launch_next();
    uint32_t t = blockIdx.x;
    for (uint32_t h = threadIdx.x; h < H; h += blockDim.x) {
        float acc = 0;
        for (uint32_t j = 0; j < k; j++)
            acc += w[(size_t)t * k + j] * out[(size_t)slot[(size_t)t * k + j] * H + h];
        x[(size_t)t * H + h] += acc;
    }
}

cudaError_t k_moe_combine(float *x, const float *out, const int32_t *slot, const float *w,
                          uint32_t T, uint32_t k, uint32_t H, cudaStream_t s)
{
    LAUNCH(moe_combine_kernel, T, 256, 0, s, x, out, slot, w, k, H);
    return cudaGetLastError();
}
