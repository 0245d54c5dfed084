/* Attention over the paged KV cache, for a step of T tokens that belong to many
 * sequences (decode tokens and prompt chunks alike), with a learned sink per head and the
 * sliding window.  Each token attends to its own sequence's positions up to its own
 * (causal), read through its sequence's block table (kernels.cuh: StepToken); the step's
 * keys and values are in the cache already (k_rope_kv_paged writes them first).
 *
 * A block of 4 warps takes one token and one KV head: the query heads of that KV head
 * (at most 8) are the rows of an m16 tile, so the products run on tensor cores (mma.sync
 * m16n8k16, fp32 accumulation).  The keys in range are cut into tiles of 64 and dealt to
 * `splits` blocks (tile i to split i % splits); a tile's keys and values flow into shared
 * memory as the fp16 they are (cp.async, two stages: the next tile loads while this one
 * is used), and each warp takes 16 of its keys (V's fragments by transposed ldmatrix):
 * S = Q K^T with Q in split fp16 (two mma: the keys are exact), an online softmax (base
 * 2) per warp, O += P V with P in split fp16 (two mma).  At the end the warps' parts are
 * merged in shared memory; with one split the block writes the token's output itself
 * (merged with the sink), with several a second kernel merges the splits (a long
 * context with few tokens in the step: the decode of one or a few sequences).
 *
 * An fp8 cache (kernels.cuh: KvCache) flows in as its bytes and row scales (two stages),
 * and the block turns each tile into fp16 in shared memory (e4m3 times the row's scale,
 * rounded to fp16) before the products, which are then the same.
 *
 * Instantiated for head_dim 16 (the tiny preset) and 64 (gpt-oss), each for an fp16 and
 * an fp8 cache. */
#include "device_util.cuh"

#define LOG2E 1.4426950408889634f
#define PTILE 64

static __device__ __forceinline__ uint32_t window_start(uint32_t pos, uint32_t window)
{
    return window && pos + 1 > window ? pos + 1 - window : 0;
}

/* Writes value v of head h, dimension d of token t: split fp16 (out_hi, out_lo) and/or
 * fp32 (out_f). */
static __device__ __forceinline__ void put_out(f16 *out_hi, f16 *out_lo, float *out_f, size_t at,
                                               float v)
{
    if (out_hi)
        split_f16(v, out_hi + at, out_lo + at);
    if (out_f)
        out_f[at] = v;
}

/* (a, b) as split fp16: the hi pair into *hi, the lo pair into *lo. */
static __device__ __forceinline__ void split_pair(float a, float b, uint32_t *hi, uint32_t *lo)
{
    __half2 h = __floats2half2_rn(a, b);
    float2 back = __half22float2(h);
    __half2 l = __floats2half2_rn(a - back.x, b - back.y);
    *hi = *reinterpret_cast<uint32_t *>(&h);
    *lo = *reinterpret_cast<uint32_t *>(&l);
}

static __device__ __forceinline__ uint32_t ld32(const kv_t *p)
{
    return *reinterpret_cast<const uint32_t *>(p);
}

#define WARPS 4

template <int HD, bool FP8>
__global__ void __launch_bounds__(WARPS * 32)
    attn_paged_kernel(f16 *out_hi, f16 *out_lo, float *out_f, float *scratch, const float *qkv,
                      KvCache kv, const StepToken *tok, const uint32_t *tables, uint32_t which,
                      const float *sinks, uint32_t heads, uint32_t kv_heads, uint32_t bt,
                      uint32_t window, uint32_t splits, float scale2)
{
    grid_wait(); /* see launch() in device_util.cuh */
    grid_launch_next();
    constexpr int KS = HD / 16;   /* k16 steps of S = Q K^T */
    constexpr int NO = HD / 8;    /* n8 tiles of O */
    constexpr int LK = HD + 8;    /* a key's (or value's) row in shared memory, f16 */
    constexpr int V8 = HD / 8;    /* 16-byte pieces of a row (fp16) */
    constexpr int R16 = HD / 16;  /* 16-byte pieces of a row (fp8) */
    constexpr int STAGE = 2 * PTILE * LK; /* f16 of one stage: keys, then values */
    /* fp16: two stages; fp8: one stage of fp16, filled from two stages of bytes */
    __shared__ __align__(16) kv_t smem[(FP8 ? 1 : 2) * STAGE];
    __shared__ __align__(16) uint8_t raw[FP8 ? 2 * 2 * PTILE * HD : 16]; /* [stage][k, v][PTILE][HD] */
    __shared__ float rscale[FP8 ? 2 * 2 * PTILE : 1];                  /* [stage][k, v][PTILE] */
    __shared__ uint32_t kvalid[2][PTILE];
    __shared__ float Msm[WARPS][8], Lsm[WARPS][8];
    float *Osm = reinterpret_cast<float *>(smem); /* after the keys: [WARPS][8][HD] */
    static_assert(WARPS * 8 * HD * sizeof(float) <= sizeof(smem), "the merge fits");

    const uint32_t t = blockIdx.x, kvh = blockIdx.y, split = blockIdx.z;
    const StepToken me = tok[t];
    const uint32_t *table = tables + me.table[which];
    const uint32_t group = heads / kv_heads, warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const uint32_t g = lane >> 2, tq = lane & 3;
    const uint32_t pos = me.pos, lo = window_start(pos, window);
    const uint32_t tiles = (pos + 1 - lo + PTILE - 1) / PTILE;
    const size_t qw = (size_t)heads * HD, width = qw + 2 * (size_t)kv_heads * HD;

    /* Q: row g is query head kvh * group + g (rows past the group, and 8..15, are 0), in
     * split fp16, scaled by 1/sqrt(hd) in base 2 */
    uint32_t qh[KS][4], ql[KS][4];
    const float *qrow = qkv + (size_t)t * width + (size_t)(kvh * group + (g < group ? g : 0)) * HD;
#pragma unroll
    for (int ks = 0; ks < KS; ks++)
#pragma unroll
        for (int j = 0; j < 4; j++) {
            float2 v = make_float2(0.0f, 0.0f);
            if (!(j & 1) && g < group)
                v = *reinterpret_cast<const float2 *>(qrow + ks * 16 + (j >> 1) * 8 + 2 * tq);
            split_pair(v.x * scale2, v.y * scale2, &qh[ks][j], &ql[ks][j]);
        }
    float m = -INFINITY, l = 0.0f, o[NO][4];
#pragma unroll
    for (int i = 0; i < NO; i++)
        o[i][0] = o[i][1] = o[i][2] = o[i][3] = 0.0f;

    /* a tile's keys and values into a stage, asynchronously (a missing block's as zeros) */
    auto issue = [&](uint32_t tile, uint32_t stage) {
        const uint32_t first = lo + tile * PTILE, count = min((uint32_t)PTILE, pos + 1 - first);
        if (FP8) {
            const uint8_t *kb = static_cast<const uint8_t *>(kv.k), *vb = static_cast<const uint8_t *>(kv.v);
            uint8_t *kr = raw + stage * 2 * PTILE * HD, *vr = kr + PTILE * HD;
            for (uint32_t i = threadIdx.x; i < PTILE * R16; i += blockDim.x) {
                uint32_t r = i / R16, c = (i % R16) * 16;
                bool ok = false;
                size_t cell = 0;
                if (r < count) {
                    uint32_t p = first + r, blk = table[p / bt];
                    ok = blk != GPT_KV_NO_BLOCK;
                    cell = ok ? ((size_t)blk * kv_heads + kvh) * bt + p % bt : 0;
                }
                cp_async16(kr + r * HD + c, kb + cell * HD + c, ok);
                cp_async16(vr + r * HD + c, vb + cell * HD + c, ok);
                if (c == 0) {
                    cp_async4(rscale + (stage * 2 + 0) * PTILE + r, kv.kscale + cell, ok);
                    cp_async4(rscale + (stage * 2 + 1) * PTILE + r, kv.vscale + cell, ok);
                    kvalid[stage][r] = ok;
                }
            }
            return;
        }
        kv_t *ks_ = smem + stage * STAGE, *vs_ = ks_ + PTILE * LK;
        const kv_t *kc = static_cast<const kv_t *>(kv.k), *vc = static_cast<const kv_t *>(kv.v);
        for (uint32_t i = threadIdx.x; i < PTILE * V8; i += blockDim.x) {
            uint32_t r = i / V8, c = (i % V8) * 8;
            bool ok = false;
            size_t at = 0;
            if (r < count) {
                uint32_t p = first + r, blk = table[p / bt];
                ok = blk != GPT_KV_NO_BLOCK; /* never, when the scheduler is right */
                at = ok ? (((size_t)blk * kv_heads + kvh) * bt + p % bt) * HD + c : 0;
            }
            cp_async16(ks_ + r * LK + c, kc + at, ok);
            cp_async16(vs_ + r * LK + c, vc + at, ok);
            if (c == 0)
                kvalid[stage][r] = ok;
        }
    };

    if (split < tiles)
        issue(split, 0);
    cp_async_commit();
    for (uint32_t i = 0, tile = split; tile < tiles; i++, tile += splits) {
        const uint32_t first = lo + tile * PTILE, count = min((uint32_t)PTILE, pos + 1 - first);
        const uint32_t stage = i & 1;
        if (tile + splits < tiles) /* the next tile flows in while this one is used */
            issue(tile + splits, stage ^ 1);
        cp_async_commit();
        cp_async_wait<1>();
        __syncthreads();
        if (FP8) { /* the stage's bytes into the fp16 tile: 8 values a piece */
            for (uint32_t i = threadIdx.x; i < 2 * PTILE * V8; i += blockDim.x) {
                uint32_t kv_i = i / (PTILE * V8), r = i / V8 % PTILE, c = (i % V8) * 8;
                const uint32_t at = (stage * 2 + kv_i) * PTILE + r;
                uint2 b = *reinterpret_cast<const uint2 *>(raw + (size_t)at * HD + c);
                float sc = rscale[at];
                uint32_t w[4];
#pragma unroll
                for (int j = 0; j < 4; j++) {
                    uint16_t two = (uint16_t)((j < 2 ? b.x : b.y) >> (16 * (j & 1)));
                    float2 f = __half22float2(e4m3x2_to_half2(two));
                    __half2 h = __floats2half2_rn(f.x * sc, f.y * sc);
                    w[j] = *reinterpret_cast<uint32_t *>(&h);
                }
                *reinterpret_cast<uint4 *>(smem + kv_i * PTILE * LK + r * LK + c) =
                    make_uint4(w[0], w[1], w[2], w[3]);
            }
            __syncthreads();
        }
        const kv_t *Ks = smem + (FP8 ? 0 : stage * STAGE), *Vs = Ks + PTILE * LK;

        /* this warp's 16 keys of the tile: S (rows g, columns 2tq, 2tq+1 of two n8 tiles) */
        const uint32_t k0 = warp * 16;
        float s[2][4];
#pragma unroll
        for (int nt = 0; nt < 2; nt++) {
            s[nt][0] = s[nt][1] = s[nt][2] = s[nt][3] = 0.0f;
#pragma unroll
            for (int ks = 0; ks < KS; ks++) {
                uint32_t at = (k0 + nt * 8 + g) * LK + ks * 16 + 2 * tq;
                uint32_t b0 = ld32(Ks + at), b1 = ld32(Ks + at + 8);
                mma_f16(s[nt], ql[ks], b0, b1);
                mma_f16(s[nt], qh[ks], b0, b1);
            }
        }
        float tmax = -INFINITY;
#pragma unroll
        for (int nt = 0; nt < 2; nt++)
#pragma unroll
            for (int j = 0; j < 2; j++) {
                uint32_t kr = k0 + nt * 8 + 2 * tq + j;
                float v = kr < count && kvalid[stage][kr] ? s[nt][j] : -INFINITY;
                s[nt][j] = v;
                tmax = fmaxf(tmax, v);
            }
        tmax = fmaxf(tmax, __shfl_xor_sync(0xffffffffu, tmax, 1));
        tmax = fmaxf(tmax, __shfl_xor_sync(0xffffffffu, tmax, 2));
        float m_new = fmaxf(m, tmax);
        float mref = m_new == -INFINITY ? 0.0f : m_new; /* no key yet */
        float alpha = exp2f(m - mref);
        m = m_new;
        float e[2][2];
#pragma unroll
        for (int nt = 0; nt < 2; nt++)
#pragma unroll
            for (int j = 0; j < 2; j++)
                e[nt][j] = exp2f(s[nt][j] - mref);
        l = l * alpha + e[0][0] + e[0][1] + e[1][0] + e[1][1];
        uint32_t ph[4] = {0, 0, 0, 0}, pl[4] = {0, 0, 0, 0}; /* rows 8..15 stay 0 */
        split_pair(e[0][0], e[0][1], &ph[0], &pl[0]);
        split_pair(e[1][0], e[1][1], &ph[2], &pl[2]);
        /* V's fragments straight from its rows by transposed ldmatrix: matrices (keys
         * k0.., dims n), (k0+8.., n), (k0.., n+8), (k0+8.., n+8) */
        const kv_t *vrow = Vs + (k0 + (lane & 7) + ((lane >> 3) & 1) * 8) * LK + (lane >> 4) * 8;
#pragma unroll
        for (int nd = 0; nd < NO; nd += 2) {
            uint32_t b[4];
            ldmatrix_x4_trans(b, vrow + nd * 8);
#pragma unroll
            for (int h2 = 0; h2 < 2; h2++) {
                o[nd + h2][0] *= alpha;
                o[nd + h2][1] *= alpha;
                mma_f16(o[nd + h2], pl, b[2 * h2], b[2 * h2 + 1]);
                mma_f16(o[nd + h2], ph, b[2 * h2], b[2 * h2 + 1]);
            }
        }
        __syncthreads(); /* the stage is used up before the next issue refills it */
    }
    cp_async_wait<0>();
    l += __shfl_xor_sync(0xffffffffu, l, 1);
    l += __shfl_xor_sync(0xffffffffu, l, 2);
    __syncthreads(); /* the stages are used up: their memory holds the warps' outputs */
    if (g < 8) {
        if (tq == 0) {
            Msm[warp][g] = m;
            Lsm[warp][g] = l;
        }
#pragma unroll
        for (int nd = 0; nd < NO; nd++) {
            Osm[(warp * 8 + g) * HD + nd * 8 + 2 * tq] = o[nd][0];
            Osm[(warp * 8 + g) * HD + nd * 8 + 2 * tq + 1] = o[nd][1];
        }
    }
    __syncthreads();
    /* the warps' parts merged: with one split the output (and the sink), else the split's
     * partial for attn_paged_merge_kernel */
    if (splits > 1 && split >= tiles)
        return; /* a split with no tile: the merge does not read it */
    for (uint32_t i = threadIdx.x; i < group * HD; i += blockDim.x) {
        uint32_t hg = i / HD, d = i % HD, h = kvh * group + hg;
        float M = -INFINITY;
#pragma unroll
        for (int w = 0; w < WARPS; w++)
            M = fmaxf(M, Msm[w][hg]);
        float sink = sinks[h] * LOG2E;
        float Mall = splits == 1 ? fmaxf(M, sink) : M;
        float num = 0.0f, den = 0.0f;
#pragma unroll
        for (int w = 0; w < WARPS; w++) {
            float f = Msm[w][hg] == -INFINITY ? 0.0f : exp2f(Msm[w][hg] - Mall);
            num += Osm[(w * 8 + hg) * HD + d] * f;
            den += Lsm[w][hg] * f;
        }
        if (splits == 1) {
            den += exp2f(sink - Mall);
            put_out(out_hi, out_lo, out_f, (size_t)t * qw + (size_t)h * HD + d, num / den);
        } else {
            float *part = scratch + (((size_t)t * splits + split) * heads + h) * (HD + 2);
            if (d == 0) {
                part[0] = M;
                part[1] = den;
            }
            part[2 + d] = num;
        }
    }
}

/* One block per (token, head), a thread per dimension: the splits that had keys (the
 * first min(splits, tiles)) merged with the sink. */
__global__ void attn_paged_merge_kernel(f16 *out_hi, f16 *out_lo, float *out_f,
                                        const float *scratch, const StepToken *tok,
                                        const float *sinks, uint32_t heads, uint32_t hd,
                                        uint32_t window, uint32_t splits)
{
    grid_wait(); /* see launch() in device_util.cuh */
    grid_launch_next();
    const uint32_t t = blockIdx.x, h = blockIdx.y, d = threadIdx.x, pos = tok[t].pos;
    const uint32_t lo = window_start(pos, window);
    const uint32_t used = min(splits, (pos + 1 - lo + PTILE - 1) / PTILE);
    const float *part = scratch + ((size_t)t * splits * heads + h) * (hd + 2);
    const size_t stride = (size_t)heads * (hd + 2);
    float sink = sinks[h] * LOG2E, M = sink;
    for (uint32_t s = 0; s < used; s++)
        M = fmaxf(M, part[s * stride]);
    float denom = exp2f(sink - M), num = 0.0f;
    for (uint32_t s = 0; s < used; s++) {
        float f = exp2f(part[s * stride] - M); /* an empty split has m = -inf: 0 */
        denom += part[s * stride + 1] * f;
        if (d < hd)
            num += part[s * stride + 2 + d] * f;
    }
    if (d < hd)
        put_out(out_hi, out_lo, out_f, (size_t)t * heads * hd + (size_t)h * hd + d, num / denom);
}

size_t k_attention_paged_scratch_floats(uint32_t rows, uint32_t heads, uint32_t hd)
{
    return (size_t)rows * heads * (hd + 2);
}

template <int HD, bool FP8>
static cudaError_t launch_attention(dim3 grid, cudaStream_t s, f16 *out_hi, f16 *out_lo,
                                    float *out_f, float *scratch, const float *qkv, KvCache kv,
                                    const StepToken *tok, const uint32_t *tables, uint32_t which,
                                    const float *sinks, uint32_t heads, uint32_t kv_heads,
                                    uint32_t bt, uint32_t window, uint32_t splits)
{
    float scale2 = LOG2E / sqrtf((float)HD);
    LAUNCH(attn_paged_kernel<HD, FP8>, grid, WARPS * 32, 0, s, out_hi, out_lo, out_f, scratch, qkv,
           kv, tok, tables, which, sinks, heads, kv_heads, bt, window, splits, scale2);
    return cudaSuccess;
}

cudaError_t k_attention_paged(f16 *out_hi, f16 *out_lo, float *out_f, float *scratch,
                              const float *qkv, KvCache kv, const StepToken *tok,
                              const uint32_t *tables, uint32_t which, const float *sinks,
                              uint32_t T, uint32_t heads, uint32_t kv_heads, uint32_t hd,
                              uint32_t block_tokens, uint32_t window, uint32_t splits,
                              cudaStream_t s)
{
    if (T == 0 || heads % kv_heads || heads / kv_heads > 8 || splits == 0 || block_tokens == 0 ||
        (!out_hi && !out_f) || (out_hi && !out_lo) || (splits > 1 && !scratch) ||
        (kv.kscale && !kv.vscale))
        return cudaErrorInvalidValue;
    dim3 grid(T, kv_heads, splits);
    const bool fp8 = kv.kscale != nullptr;
    cudaError_t e;
    if (hd == 64)
        e = fp8 ? launch_attention<64, true>(grid, s, out_hi, out_lo, out_f, scratch, qkv, kv, tok,
                                             tables, which, sinks, heads, kv_heads, block_tokens,
                                             window, splits)
                : launch_attention<64, false>(grid, s, out_hi, out_lo, out_f, scratch, qkv, kv, tok,
                                              tables, which, sinks, heads, kv_heads, block_tokens,
                                              window, splits);
    else if (hd == 16)
        e = fp8 ? launch_attention<16, true>(grid, s, out_hi, out_lo, out_f, scratch, qkv, kv, tok,
                                             tables, which, sinks, heads, kv_heads, block_tokens,
                                             window, splits)
                : launch_attention<16, false>(grid, s, out_hi, out_lo, out_f, scratch, qkv, kv, tok,
                                              tables, which, sinks, heads, kv_heads, block_tokens,
                                              window, splits);
    else
        return cudaErrorInvalidValue;
    if (e != cudaSuccess)
        return e;
    if (splits > 1)
        LAUNCH(attn_paged_merge_kernel, dim3(T, heads), hd < 32 ? 32 : hd, 0, s, out_hi, out_lo,
               out_f, scratch, tok, sinks, heads, hd, window, splits);
    return cudaGetLastError();
}
