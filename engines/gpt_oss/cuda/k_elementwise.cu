/* The small kernels of the gpt-oss CUDA path: embedding, RMSNorm, the RoPE table,
 * RoPE and the KV store, the router, expert grouping and combining, and picking the
 * next token.  See kernels.cuh. */
#include <float.h>

#include "device_util.cuh"

/* ---- conversions at load ----------------------------------------------------------------- */

/* bf16 -> fp16 in place; counts values beyond fp16's range (they saturate). */
__global__ void bf16_to_f16_kernel(uint16_t *p, size_t n, unsigned long long *overflow)
{
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    for (; i < n; i += (size_t)gridDim.x * blockDim.x) {
        float f = __uint_as_float((uint32_t)p[i] << 16);
        if (fabsf(f) > 65504.0f && overflow)
            atomicAdd(overflow, 1ull);
        f16 h = to_f16(f);
        p[i] = *reinterpret_cast<uint16_t *>(&h);
    }
}

cudaError_t k_bf16_to_f16(void *p, size_t n, unsigned long long *overflow, cudaStream_t s)
{
    bf16_to_f16_kernel<<<1024, 256, 0, s>>>(static_cast<uint16_t *>(p), n, overflow);
    return cudaGetLastError();
}

__global__ void byte_range_kernel(const uint8_t *p, size_t n, uint32_t *lo_hi)
{
    uint32_t lo = 255, hi = 0;
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    for (; i < n; i += (size_t)gridDim.x * blockDim.x) {
        lo = min(lo, (uint32_t)p[i]);
        hi = max(hi, (uint32_t)p[i]);
    }
    atomicMin(&lo_hi[0], lo);
    atomicMax(&lo_hi[1], hi);
}

cudaError_t k_byte_range(const uint8_t *p, size_t n, uint32_t *lo_hi, cudaStream_t s)
{
    byte_range_kernel<<<512, 256, 0, s>>>(p, n, lo_hi);
    return cudaGetLastError();
}

/* ---- embedding ------------------------------------------------------------------------ */

__global__ void embed_kernel(float *x, const bf16 *embed, const int32_t *ids, uint32_t H)
{
    grid_wait(); /* see launch() in device_util.cuh */
    grid_launch_next();
    uint32_t t = blockIdx.x;
    const bf16 *row = embed + (size_t)ids[t] * H;
    for (uint32_t i = threadIdx.x; i < H; i += blockDim.x)
        x[(size_t)t * H + i] = __bfloat162float(row[i]);
}

cudaError_t k_embed(float *x, const bf16 *embed, const int32_t *ids, uint32_t T, uint32_t H,
                    cudaStream_t s)
{
    LAUNCH(embed_kernel, T, 256, 0, s, x, embed, ids, H);
    return cudaGetLastError();
}

/* ---- RMSNorm ----------------------------------------------------------------------------- */

__global__ void rmsnorm_kernel(f16 *out_h, f16 *out_lo, float *out_f, const float *x,
                               const float *w, uint32_t H, float eps)
{
    grid_wait(); /* see launch() in device_util.cuh */
    grid_launch_next();
    __shared__ float partial[32];
    uint32_t t = blockIdx.x;
    const float *xr = x + (size_t)t * H;
    float ss = 0;
    for (uint32_t i = threadIdx.x; i < H; i += blockDim.x)
        ss += xr[i] * xr[i];
    ss = warp_sum(ss);
    if ((threadIdx.x & 31) == 0)
        partial[threadIdx.x >> 5] = ss;
    __syncthreads();
    if (threadIdx.x < 32) {
        float v = threadIdx.x < (blockDim.x >> 5) ? partial[threadIdx.x] : 0.0f;
        v = warp_sum(v);
        if (threadIdx.x == 0)
            partial[0] = rsqrtf(v / H + eps);
    }
    __syncthreads();
    float r = partial[0];
    for (uint32_t i = threadIdx.x; i < H; i += blockDim.x) {
        float v = w[i] * (xr[i] * r);
        if (out_lo)
            split_f16(v, out_h + (size_t)t * H + i, out_lo + (size_t)t * H + i);
        else if (out_h)
            out_h[(size_t)t * H + i] = to_f16(v);
        if (out_f)
            out_f[(size_t)t * H + i] = v;
    }
}

cudaError_t k_rmsnorm(f16 *out_h, f16 *out_lo, float *out_f, const float *x, const float *w,
                      uint32_t T, uint32_t H, float eps, cudaStream_t s)
{
    if (out_lo && !out_h)
        return cudaErrorInvalidValue;
    LAUNCH(rmsnorm_kernel, T, 512, 0, s, out_h, out_lo, out_f, x, w, H, eps);
    return cudaGetLastError();
}

/* ---- RoPE and the KV cache ----------------------------------------------------------- */

/* In double, as the CPU path: angle = pos * inv_freq[i]; (cos, sin) * attn_factor. */
__global__ void rope_table_kernel(float2 *cs, const double *inv_freq, double attn_factor,
                                  uint32_t positions, uint32_t half)
{
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (size_t)positions * half)
        return;
    double angle = (double)(i / half) * inv_freq[i % half], sn, cn;
    sincos(angle, &sn, &cn);
    cs[i] = make_float2((float)(cn * attn_factor), (float)(sn * attn_factor));
}

cudaError_t k_rope_table(float2 *cos_sin, const double *inv_freq, double attn_factor,
                         uint32_t positions, uint32_t half, cudaStream_t s)
{
    size_t n = (size_t)positions * half;
    rope_table_kernel<<<(unsigned)((n + 255) / 256), 256, 0, s>>>(cos_sin, inv_freq, attn_factor,
                                                                  positions, half);
    return cudaGetLastError();
}

/* One block per token; threads over (head, pair). */
__global__ void rope_kernel(float *qkv, const KvView *kvp, const float2 *cos_sin,
                            const uint32_t *d_pos, uint32_t pos0, uint32_t heads,
                            uint32_t kv_heads, uint32_t hd)
{
    grid_wait(); /* see launch() in device_util.cuh */
    grid_launch_next();
    uint32_t t = blockIdx.x, half = hd / 2;
    uint32_t pos = (d_pos ? *d_pos : pos0) + t;
    uint32_t qw = heads * hd, kvw = kv_heads * hd, width = qw + 2 * kvw;
    float *row = qkv + (size_t)t * width;
    const float2 *cs = cos_sin + (size_t)pos * half;
    KvView kv = {};
    if (kvp)
        kv = *kvp;
    uint32_t slot = kv.ring ? pos % kv.cap : pos;
    for (uint32_t j = threadIdx.x; j < (heads + kv_heads) * half; j += blockDim.x) {
        uint32_t h = j / half, i = j % half;
        float *v = row + (size_t)h * hd; /* q heads, then k heads right after */
        float2 c = cs[i];
        float a = v[i], b = v[i + half];
        float ra = a * c.x - b * c.y, rb = b * c.x + a * c.y;
        v[i] = ra;
        v[i + half] = rb;
        if (kvp && h >= heads) {
            float *dst = kv.k + ((size_t)(h - heads) * kv.cap + slot) * hd;
            dst[i] = ra;
            dst[i + half] = rb;
        }
    }
    if (kvp)
        for (uint32_t j = threadIdx.x; j < kvw; j += blockDim.x)
            kv.v[((size_t)(j / hd) * kv.cap + slot) * hd + j % hd] = row[qw + kvw + j];
}

cudaError_t k_rope(float *qkv, const KvView *kv, const float2 *cos_sin, const uint32_t *d_pos,
                   uint32_t pos0, uint32_t T, uint32_t heads, uint32_t kv_heads, uint32_t hd,
                   cudaStream_t s)
{
    if (kv && T != 1)
        return cudaErrorInvalidValue;
    /* one block per token: 1024 threads when there are few (the decode step's one
     * token: its 2,800 pairs and values in 3 rounds, not 11) */
    LAUNCH(rope_kernel, T, T < 16 ? 1024 : 256, 0, s, qkv, kv, cos_sin, d_pos, pos0, heads,
           kv_heads, hd);
    return cudaGetLastError();
}

__global__ void kv_store_kernel(const KvView *kvp, const float *qkv, uint32_t pos0, uint32_t T,
                                uint32_t heads, uint32_t kv_heads, uint32_t hd)
{
    grid_wait(); /* see launch() in device_util.cuh */
    grid_launch_next();
    const KvView kv = *kvp;
    uint32_t t = blockIdx.x, pos = pos0 + t;
    if (kv.ring && T > kv.cap && t < T - kv.cap)
        return; /* a ring keeps the last cap positions */
    if (!kv.ring && pos >= kv.cap)
        return;
    uint32_t slot = kv.ring ? pos % kv.cap : pos, kvw = kv_heads * hd;
    const float *k = qkv + (size_t)t * ((size_t)heads * hd + 2 * kvw) + (size_t)heads * hd;
    for (uint32_t j = threadIdx.x; j < kvw; j += blockDim.x) {
        size_t at = ((size_t)(j / hd) * kv.cap + slot) * hd + j % hd;
        kv.k[at] = k[j];
        kv.v[at] = k[kvw + j];
    }
}

cudaError_t k_kv_store(const KvView *kv, const float *qkv, uint32_t pos0, uint32_t T,
                       uint32_t heads, uint32_t kv_heads, uint32_t hd, cudaStream_t s)
{
    LAUNCH(kv_store_kernel, T, 256, 0, s, kv, qkv, pos0, T, heads, kv_heads, hd);
    return cudaGetLastError();
}

/* ---- the router ------------------------------------------------------------------------- */

/* One block per token, a warp per expert (up to four when E > 32); 16-byte loads of the
 * router's fp16 rows against the token's normed input in fp32 (so the choice of
 * experts does not hang on fp16 rounding); then one warp picks the top k. */
__global__ void __launch_bounds__(1024) router_kernel(int32_t *ids, float *weights, const float *xn,
                                                     const f16 *w, const float *b, uint32_t H,
                                                     uint32_t E, uint32_t k)
{
    grid_wait(); /* see launch() in device_util.cuh */
    grid_launch_next();
    __shared__ float logits[GPT_MAX_EXPERTS];
    uint32_t t = blockIdx.x, warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
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

cudaError_t k_router(int32_t *ids, float *weights, const float *xn, const f16 *w, const float *b,
                     uint32_t T, uint32_t H, uint32_t E, uint32_t k, cudaStream_t s)
{
    if (E > GPT_MAX_EXPERTS || k > 8 || k > E || H % 8)
        return cudaErrorInvalidValue;
    LAUNCH(router_kernel, T, 32 * min(E, 32u), 0, s, ids, weights, xn, w, b, H, E, k);
    return cudaGetLastError();
}

/* ---- SwiGLU, grouping, combining -------------------------------------------------------- */

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

/* ---- picking the next token -------------------------------------------------------------- */

static __device__ __forceinline__ uint64_t mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* A Gumbel variate for (seed, step, i): -log(-log(u)), u in (0, 1). */
static __device__ __forceinline__ float gumbel(uint64_t seed, uint64_t step, uint32_t i)
{
    uint64_t r = mix64(seed ^ mix64(step * 0x9e3779b97f4a7c15ull + i));
    float u = ((float)(r >> 40) + 0.5f) * (1.0f / 16777216.0f);
    return -__logf(-__logf(u));
}

/* The pick in two launches: PICK_BLOCKS blocks each take a contiguous slice of the
 * vocabulary (its max, the argmax of the perturbed logits, the sum of exp against
 * its own max), then one block merges the slices and writes the state.  Ties keep
 * the lower id, as the CPU sampler does. */
#define PICK_BLOCKS 128u
#define PICK_THREADS 256u

struct PickPart {
    float best;  /* the best (perturbed) score */
    int32_t id;  /* its id */
    float max;   /* the slice's largest logit */
    float sum;   /* sum of exp(logit - max) over the slice */
};

size_t k_pick_scratch_bytes(void)
{
    return PICK_BLOCKS * sizeof(PickPart);
}

static __device__ __forceinline__ void better(float &best, int32_t &id, float ob, int32_t oi)
{
    if (ob > best || (ob == best && oi < id)) {
        best = ob;
        id = oi;
    }
}

/* Block-wide: the best (score, id) and the max into every thread's variables. */
static __device__ void block_best_max(float &best, int32_t &id, float &mx)
{
    __shared__ float s_best[32], s_max[32];
    __shared__ int32_t s_id[32];
    uint32_t warp = threadIdx.x >> 5, lane = threadIdx.x & 31, nw = blockDim.x >> 5;
    for (int o = 16; o > 0; o >>= 1) {
        better(best, id, __shfl_xor_sync(0xffffffffu, best, o),
               __shfl_xor_sync(0xffffffffu, id, o));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
    }
    if (lane == 0) {
        s_best[warp] = best;
        s_id[warp] = id;
        s_max[warp] = mx;
    }
    __syncthreads();
    best = lane < nw ? s_best[lane] : -FLT_MAX;
    id = lane < nw ? s_id[lane] : 0x7fffffff;
    mx = lane < nw ? s_max[lane] : -FLT_MAX;
    for (int o = 16; o > 0; o >>= 1) {
        better(best, id, __shfl_xor_sync(0xffffffffu, best, o),
               __shfl_xor_sync(0xffffffffu, id, o));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
    }
    __syncthreads(); /* the arrays may be used again */
}

static __device__ float block_sum(float v)
{
    __shared__ float s_sum[32];
    uint32_t warp = threadIdx.x >> 5, lane = threadIdx.x & 31, nw = blockDim.x >> 5;
    v = warp_sum(v);
    if (lane == 0)
        s_sum[warp] = v;
    __syncthreads();
    v = lane < nw ? s_sum[lane] : 0.0f;
    v = warp_sum(v);
    __syncthreads();
    return v;
}

__global__ void __launch_bounds__(PICK_THREADS) pick_slice_kernel(PickPart *parts,
                                                                  const SeqState *st,
                                                                  const float *logits,
                                                                  uint32_t vocab)
{
    grid_wait(); /* see launch() in device_util.cuh */
    grid_launch_next();
    const uint64_t step = st->step, seed = st->seed;
    const float temperature = st->temperature;
    uint32_t per = (vocab + PICK_BLOCKS - 1) / PICK_BLOCKS;
    uint32_t lo = blockIdx.x * per, hi = min(vocab, lo + per);
    float best = -FLT_MAX, mx = -FLT_MAX;
    int32_t id = 0x7fffffff;
    for (uint32_t i = lo + threadIdx.x; i < hi; i += blockDim.x) {
        float l = logits[i];
        mx = fmaxf(mx, l);
        float score = temperature > 0 ? l / temperature + gumbel(seed, step, i) : l;
        better(best, id, score, (int32_t)i); /* ascending i per thread */
    }
    block_best_max(best, id, mx);
    float sum = 0;
    for (uint32_t i = lo + threadIdx.x; i < hi; i += blockDim.x)
        sum += __expf(logits[i] - mx);
    sum = block_sum(sum);
    if (threadIdx.x == 0)
        parts[blockIdx.x] = PickPart{best, id, mx, lo < hi ? sum : 0.0f};
}

__global__ void __launch_bounds__(PICK_BLOCKS) pick_merge_kernel(SeqState *st,
                                                                 const float *logits,
                                                                 const PickPart *parts,
                                                                 uint32_t advance)
{
    grid_wait(); /* see launch() in device_util.cuh */
    grid_launch_next();
    PickPart p = parts[threadIdx.x];
    float best = p.best, mx = p.max;
    int32_t id = p.id;
    block_best_max(best, id, mx);
    float total = block_sum(p.sum > 0 ? p.sum * __expf(p.max - mx) : 0.0f);
    if (threadIdx.x == 0) {
        st->pick_id = id;
        st->pick_logprob = logits[id] - mx - __logf(total);
        st->token = id;
        st->step = st->step + 1;
        st->pos += advance;
    }
}

cudaError_t k_pick(SeqState *st, const float *logits, uint32_t vocab, void *scratch,
                   uint32_t advance, cudaStream_t s)
{
    if (vocab == 0)
        return cudaErrorInvalidValue;
    PickPart *parts = static_cast<PickPart *>(scratch);
    LAUNCH(pick_slice_kernel, PICK_BLOCKS, PICK_THREADS, 0, s, parts, st, logits, vocab);
    LAUNCH(pick_merge_kernel, 1, PICK_BLOCKS, 0, s, st, logits, parts, advance);
    return cudaGetLastError();
}

__global__ void advance_kernel(SeqState *st, uint32_t n)
{
    grid_wait(); /* see launch() in device_util.cuh */
    grid_launch_next();
    st->pos += n;
}

cudaError_t k_advance(SeqState *st, uint32_t n, cudaStream_t s)
{
    LAUNCH(advance_kernel, 1, 1, 0, s, st, n);
    return cudaGetLastError();
}
