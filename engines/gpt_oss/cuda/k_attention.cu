/* Attention of the gpt-oss CUDA path, with a learned sink per head and the sliding
 * window, over the fp32 KV cache.
 *
 * Decode: one query per head.  The keys in range are cut into tiles of 64, dealt to
 * `splits` blocks per KV head (tile i to split i % splits); a block's warps are the
 * query heads of its KV head, each keeping an online softmax (base 2) over its tiles,
 * and a second kernel merges the splits with the sink.
 *
 * Prefill: flash-style on tensor cores.  A block of 4 warps takes 64 queries of one
 * head; per tile of 64 keys, S = Q K^T and O += P V by mma.sync m16n8k16 (P goes from
 * the accumulators of S to the operands of P V in registers), keys and V (transposed)
 * staged in shared memory, masked by causality and the window.  Every operand is split
 * fp16 (kernels.cuh): a product x y is x_hi y_hi + x_hi y_lo + x_lo y_hi (the lo lo
 * term is below fp32's rounding), so S and P V are three mma each.
 *
 * Both are instantiated for head_dim 16 (the tiny preset) and 64 (gpt-oss). */
#include <float.h>

#include "device_util.cuh"

#define LOG2E 1.4426950408889634f
#define TILE 64

static __device__ __forceinline__ uint32_t slot_of(const KvView &kv, uint32_t pos)
{
    return kv.ring ? pos % kv.cap : pos;
}

/* ---- decode -------------------------------------------------------------------------- */

template <int HD>
__global__ void __launch_bounds__(256) attn_decode_kernel(float *scratch, const float *q,
                                                          const KvView *kvp,
                                                          const uint32_t *d_pos,
                                                          uint32_t heads, uint32_t kv_heads,
                                                          uint32_t window, uint32_t splits,
                                                          float scale2)
{
    grid_wait(); /* see launch() in device_util.cuh */
    grid_launch_next();
    constexpr int DPL = HD >= 32 ? HD / 32 : 1; /* dims per lane */
    __shared__ float Ks[TILE][HD + 1];
    __shared__ float Vs[TILE][HD];
    __shared__ float qs[8][HD];
    __shared__ float P[8][TILE];
    const KvView kv = *kvp;
    const uint32_t kvh = blockIdx.x, split = blockIdx.y;
    const uint32_t group = heads / kv_heads, warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const uint32_t h = kvh * group + warp;
    const bool active = warp < group;
    const uint32_t pos = *d_pos;
    const uint32_t lo = window && pos + 1 > window ? pos + 1 - window : 0;
    const uint32_t n = pos + 1 - lo, tiles = (n + TILE - 1) / TILE;

    if (active)
        for (uint32_t d = lane; d < HD; d += 32)
            qs[warp][d] = q[(size_t)h * HD + d] * scale2;
    float m = -INFINITY, l = 0.0f, acc[DPL];
#pragma unroll
    for (int i = 0; i < DPL; i++)
        acc[i] = 0.0f;

    const float *kbase = kv.k + (size_t)kvh * kv.cap * HD, *vbase = kv.v + (size_t)kvh * kv.cap * HD;
    for (uint32_t tile = split; tile < tiles; tile += splits) {
        uint32_t first = lo + tile * TILE, count = min((uint32_t)TILE, pos + 1 - first);
        __syncthreads(); /* the previous tile is used up */
        for (uint32_t i = threadIdx.x; i < TILE * HD / 2; i += blockDim.x) {
            uint32_t r = i / (HD / 2), d = (i % (HD / 2)) * 2;
            float2 kf = make_float2(0.0f, 0.0f), vf = kf;
            if (r < count) {
                size_t at = (size_t)slot_of(kv, first + r) * HD + d;
                kf = *reinterpret_cast<const float2 *>(kbase + at);
                vf = *reinterpret_cast<const float2 *>(vbase + at);
            }
            Ks[r][d] = kf.x;
            Ks[r][d + 1] = kf.y;
            Vs[r][d] = vf.x;
            Vs[r][d + 1] = vf.y;
        }
        __syncthreads();
        if (!active)
            continue;
        float s[2];
#pragma unroll
        for (int j = 0; j < 2; j++) {
            uint32_t r = lane + 32 * j;
            float dot = 0.0f;
#pragma unroll 16
            for (int d = 0; d < HD; d++)
                dot += qs[warp][d] * Ks[r][d];
            s[j] = r < count ? dot : -INFINITY;
        }
        float m_new = fmaxf(m, warp_max(fmaxf(s[0], s[1])));
        float alpha = exp2f(m - m_new); /* m = -inf at first: 0 */
        float p0 = exp2f(s[0] - m_new), p1 = exp2f(s[1] - m_new);
        P[warp][lane] = p0;
        P[warp][lane + 32] = p1;
        float ps = p0 + p1;
        for (int o = 16; o > 0; o >>= 1)
            ps += __shfl_xor_sync(0xffffffffu, ps, o);
        l = l * alpha + ps;
        m = m_new;
        __syncwarp();
#pragma unroll
        for (int i = 0; i < DPL; i++) {
            uint32_t d = lane + 32 * i;
            float a = acc[i] * alpha;
            if (d < HD)
                for (uint32_t r = 0; r < count; r++)
                    a += P[warp][r] * Vs[r][d];
            acc[i] = a;
        }
        __syncwarp();
    }
    if (!active || split >= tiles) /* a split with no tile: the merge does not read it */
        return;
    float *out = scratch + ((size_t)split * heads + h) * (HD + 2);
    if (lane == 0) {
        out[0] = m;
        out[1] = l;
    }
#pragma unroll
    for (int i = 0; i < DPL; i++) {
        uint32_t d = lane + 32 * i;
        if (d < HD)
            out[2 + d] = acc[i];
    }
}

/* One block per head, a thread per dimension: the splits that had keys (the first
 * min(splits, tiles)) merged with the sink. */
__global__ void attn_combine_kernel(float *out, const float *scratch, const float *sinks,
                                    const uint32_t *d_pos, uint32_t window, uint32_t heads,
                                    uint32_t hd, uint32_t splits)
{
    grid_wait(); /* see launch() in device_util.cuh */
    grid_launch_next();
    uint32_t h = blockIdx.x, d = threadIdx.x, pos = *d_pos;
    uint32_t lo = window && pos + 1 > window ? pos + 1 - window : 0;
    splits = min(splits, (pos + 1 - lo + TILE - 1) / TILE);
    float sink = sinks[h] * LOG2E, M = sink;
    for (uint32_t s = 0; s < splits; s++)
        M = fmaxf(M, scratch[((size_t)s * heads + h) * (hd + 2)]);
    float denom = exp2f(sink - M), num = 0.0f;
    for (uint32_t s = 0; s < splits; s++) {
        const float *part = scratch + ((size_t)s * heads + h) * (hd + 2);
        float f = exp2f(part[0] - M); /* an empty split has m = -inf: 0 */
        denom += part[1] * f;
        if (d < hd)
            num += part[2 + d] * f;
    }
    if (d < hd)
        out[(size_t)h * hd + d] = num / denom;
}

cudaError_t k_attention_decode(float *out, float *scratch, const float *q, const KvView *kv,
                               const float *sinks, const uint32_t *d_pos, uint32_t heads,
                               uint32_t kv_heads, uint32_t hd, uint32_t window, uint32_t splits,
                               cudaStream_t s)
{
    if (heads % kv_heads || heads / kv_heads > 8 || splits == 0)
        return cudaErrorInvalidValue;
    dim3 grid(kv_heads, splits);
    float scale2 = LOG2E / sqrtf((float)hd);
    if (hd == 64)
        LAUNCH(attn_decode_kernel<64>, grid, 256, 0, s, scratch, q, kv, d_pos, heads, kv_heads, window,
                                                    splits, scale2);
    else if (hd == 16)
        LAUNCH(attn_decode_kernel<16>, grid, 256, 0, s, scratch, q, kv, d_pos, heads, kv_heads, window,
                                                    splits, scale2);
    else
        return cudaErrorInvalidValue;
    cudaError_t err = cudaGetLastError();
    if (err != cudaSuccess)
        return err;
    LAUNCH(attn_combine_kernel, heads, hd < 32 ? 32 : hd, 0, s, out, scratch, sinks, d_pos, window,
           heads, hd, splits);
    return cudaGetLastError();
}

/* ---- prefill --------------------------------------------------------------------------- */

/* (a, b) as split fp16: the hi pair into *hi, the lo pair into *lo. */
static __device__ __forceinline__ void split_pair(float a, float b, uint32_t *hi, uint32_t *lo)
{
    __half2 h = __floats2half2_rn(a, b);
    float2 back = __half22float2(h);
    __half2 l = __floats2half2_rn(a - back.x, b - back.y);
    *hi = *reinterpret_cast<uint32_t *>(&h);
    *lo = *reinterpret_cast<uint32_t *>(&l);
}

static __device__ __forceinline__ uint32_t ld32(const f16 *p)
{
    return *reinterpret_cast<const uint32_t *>(p);
}

/* x y for split fp16 fragments (three mma: the lo lo term is dropped). */
static __device__ __forceinline__ void mma_split(float *acc, const uint32_t *a_hi,
                                                 const uint32_t *a_lo, uint32_t b0_hi,
                                                 uint32_t b1_hi, uint32_t b0_lo, uint32_t b1_lo)
{
    mma_f16(acc, a_lo, b0_hi, b1_hi);
    mma_f16(acc, a_hi, b0_lo, b1_lo);
    mma_f16(acc, a_hi, b0_hi, b1_hi);
}

template <int HD>
__global__ void __launch_bounds__(128) attn_prefill_kernel(f16 *out_hi, f16 *out_lo,
                                                           const float *qkv, const KvView *kvp,
                                                           const float *sinks, uint32_t pos0,
                                                           uint32_t T, uint32_t heads,
                                                           uint32_t kv_heads, uint32_t window,
                                                           float scale2)
{
    grid_wait(); /* see launch() in device_util.cuh */
    grid_launch_next();
    constexpr int KS = HD / 16; /* k16 steps of S = Q K^T */
    constexpr int NO = HD / 8;  /* n8 tiles of O */
    constexpr int LK = HD + 8, LV = TILE + 8;
    /* the tile's keys and V (transposed), hi and lo parts */
    __shared__ __align__(16) f16 Kh[TILE * LK], Kl[TILE * LK];
    __shared__ __align__(16) f16 Vh[HD * LV], Vl[HD * LV];
    const KvView kv = *kvp;
    const uint32_t h = blockIdx.y, kvh = h / (heads / kv_heads);
    const uint32_t q0 = blockIdx.x * 64, warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const uint32_t g = lane >> 2, t = lane & 3;
    const uint32_t qw = heads * HD, kvw = kv_heads * HD, width = qw + 2 * kvw;

    /* this warp's rows: q0 + warp*16 + g and + 8 (clamped to T-1 for loading) */
    const uint32_t r0 = q0 + warp * 16 + g, r1 = r0 + 8;
    const float *qr0 = qkv + (size_t)min(r0, T - 1) * width + (size_t)h * HD;
    const float *qr1 = qkv + (size_t)min(r1, T - 1) * width + (size_t)h * HD;
    uint32_t qh[KS][4], ql[KS][4];
#pragma unroll
    for (int ks = 0; ks < KS; ks++)
#pragma unroll
        for (int j = 0; j < 4; j++) { /* rows r0, r1, r0, r1; columns 2t, 2t, 2t+8, 2t+8 */
            float2 v = *reinterpret_cast<const float2 *>((j & 1 ? qr1 : qr0) + ks * 16 +
                                                         (j >> 1) * 8 + 2 * t);
            split_pair(v.x, v.y, &qh[ks][j], &ql[ks][j]);
        }
    const uint32_t p0 = pos0 + r0, p1 = pos0 + r1; /* the rows' positions */
    float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};
    float o[NO][4];
#pragma unroll
    for (int i = 0; i < NO; i++)
        o[i][0] = o[i][1] = o[i][2] = o[i][3] = 0.0f;

    const uint32_t qa_pos = pos0 + q0, qz_pos = pos0 + min(q0 + 63, T - 1);
    const uint32_t lo = window && qa_pos + 1 > window ? qa_pos + 1 - window : 0;
    const float *kc = kv.k + (size_t)kvh * kv.cap * HD, *vc = kv.v + (size_t)kvh * kv.cap * HD;
    const float *k_new = qkv + qw + (size_t)kvh * HD, *v_new = k_new + kvw;

    for (uint32_t kb = lo; kb <= qz_pos; kb += TILE) {
        __syncthreads();
        for (uint32_t i = threadIdx.x; i < TILE * HD / 4; i += blockDim.x) {
            uint32_t r = i / (HD / 4), d = (i % (HD / 4)) * 4, kp = kb + r;
            float4 k4 = make_float4(0.0f, 0.0f, 0.0f, 0.0f), v4 = k4;
            if (kp <= qz_pos) {
                const float *ks, *vs;
                if (kp < pos0) {
                    size_t at = (size_t)slot_of(kv, kp) * HD + d;
                    ks = kc + at;
                    vs = vc + at;
                } else {
                    size_t at = (size_t)(kp - pos0) * width + d;
                    ks = k_new + at;
                    vs = v_new + at;
                }
                k4 = *reinterpret_cast<const float4 *>(ks);
                v4 = *reinterpret_cast<const float4 *>(vs);
            }
            uint32_t h01, l01, h23, l23;
            split_pair(k4.x, k4.y, &h01, &l01);
            split_pair(k4.z, k4.w, &h23, &l23);
            *reinterpret_cast<uint2 *>(Kh + r * LK + d) = make_uint2(h01, h23);
            *reinterpret_cast<uint2 *>(Kl + r * LK + d) = make_uint2(l01, l23);
            const float vv[4] = {v4.x, v4.y, v4.z, v4.w};
#pragma unroll
            for (int j = 0; j < 4; j++)
                split_f16(vv[j], Vh + (d + j) * LV + r, Vl + (d + j) * LV + r);
        }
        __syncthreads();

        float s[8][4];
#pragma unroll
        for (int nt = 0; nt < 8; nt++) {
            s[nt][0] = s[nt][1] = s[nt][2] = s[nt][3] = 0.0f;
#pragma unroll
            for (int ks = 0; ks < KS; ks++) {
                uint32_t at = (nt * 8 + g) * LK + ks * 16 + 2 * t;
                mma_split(s[nt], qh[ks], ql[ks], ld32(Kh + at), ld32(Kh + at + 8), ld32(Kl + at),
                          ld32(Kl + at + 8));
            }
        }
        float tmax[2] = {-INFINITY, -INFINITY};
#pragma unroll
        for (int nt = 0; nt < 8; nt++)
#pragma unroll
            for (int j = 0; j < 4; j++) {
                uint32_t kp = kb + nt * 8 + 2 * t + (j & 1), qp = j < 2 ? p0 : p1;
                bool ok = kp <= qp && (!window || qp - kp < window);
                float v = ok ? s[nt][j] * scale2 : -INFINITY;
                s[nt][j] = v;
                tmax[j >> 1] = fmaxf(tmax[j >> 1], v);
            }
        float alpha[2], mref[2];
#pragma unroll
        for (int r = 0; r < 2; r++) {
            tmax[r] = fmaxf(tmax[r], __shfl_xor_sync(0xffffffffu, tmax[r], 1));
            tmax[r] = fmaxf(tmax[r], __shfl_xor_sync(0xffffffffu, tmax[r], 2));
            float m_new = fmaxf(m[r], tmax[r]);
            mref[r] = m_new == -INFINITY ? 0.0f : m_new; /* a row with no key yet */
            alpha[r] = exp2f(m[r] - mref[r]);
            m[r] = m_new;
        }
        float rs[2] = {0.0f, 0.0f};
        uint32_t ph[4][4], pl[4][4];
#pragma unroll
        for (int nt = 0; nt < 8; nt++) {
            float e0 = exp2f(s[nt][0] - mref[0]), e1 = exp2f(s[nt][1] - mref[0]);
            float e2 = exp2f(s[nt][2] - mref[1]), e3 = exp2f(s[nt][3] - mref[1]);
            rs[0] += e0 + e1;
            rs[1] += e2 + e3;
            int ks = nt >> 1, hi = nt & 1;
            split_pair(e0, e1, &ph[ks][hi * 2 + 0], &pl[ks][hi * 2 + 0]);
            split_pair(e2, e3, &ph[ks][hi * 2 + 1], &pl[ks][hi * 2 + 1]);
        }
        l[0] = l[0] * alpha[0] + rs[0];
        l[1] = l[1] * alpha[1] + rs[1];
#pragma unroll
        for (int i = 0; i < NO; i++) {
            o[i][0] *= alpha[0];
            o[i][1] *= alpha[0];
            o[i][2] *= alpha[1];
            o[i][3] *= alpha[1];
        }
#pragma unroll
        for (int ks = 0; ks < 4; ks++)
#pragma unroll
            for (int i = 0; i < NO; i++) {
                uint32_t at = (i * 8 + g) * LV + ks * 16 + 2 * t;
                mma_split(o[i], ph[ks], pl[ks], ld32(Vh + at), ld32(Vh + at + 8), ld32(Vl + at),
                          ld32(Vl + at + 8));
            }
    }

    const float sink = sinks[h] * LOG2E;
#pragma unroll
    for (int r = 0; r < 2; r++) {
        l[r] += __shfl_xor_sync(0xffffffffu, l[r], 1);
        l[r] += __shfl_xor_sync(0xffffffffu, l[r], 2);
    }
#pragma unroll
    for (int r = 0; r < 2; r++) {
        uint32_t row = r ? r1 : r0;
        if (row >= T)
            continue;
        float M = fmaxf(m[r], sink), f = exp2f(m[r] - M);
        float inv = f / (l[r] * f + exp2f(sink - M));
        size_t at = (size_t)row * qw + (size_t)h * HD + 2 * t;
#pragma unroll
        for (int i = 0; i < NO; i++)
            split_pair(o[i][2 * r] * inv, o[i][2 * r + 1] * inv,
                       reinterpret_cast<uint32_t *>(out_hi + at + i * 8),
                       reinterpret_cast<uint32_t *>(out_lo + at + i * 8));
    }
}

cudaError_t k_attention_prefill(f16 *out_hi, f16 *out_lo, const float *qkv, const KvView *kv,
                                const float *sinks, uint32_t pos0, uint32_t T, uint32_t heads,
                                uint32_t kv_heads, uint32_t hd, uint32_t window, cudaStream_t s)
{
    if (T == 0 || heads % kv_heads)
        return cudaErrorInvalidValue;
    dim3 grid((T + 63) / 64, heads);
    float scale2 = LOG2E / sqrtf((float)hd);
    if (hd == 64)
        LAUNCH(attn_prefill_kernel<64>, grid, 128, 0, s, out_hi, out_lo, qkv, kv, sinks, pos0, T,
               heads, kv_heads, window, scale2);
    else if (hd == 16)
        LAUNCH(attn_prefill_kernel<16>, grid, 128, 0, s, out_hi, out_lo, qkv, kv, sinks, pos0, T,
               heads, kv_heads, window, scale2);
    else
        return cudaErrorInvalidValue;
    return cudaGetLastError();
}
