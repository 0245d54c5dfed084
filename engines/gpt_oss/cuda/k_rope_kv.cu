/* RoPE for a step of T tokens at positions of their own, and the step's keys and values
 * written into the paged KV cache as fp16, or as fp8 e4m3 with a scale per row
 * (kernels.cuh: KvCache; StepToken says where each token's go); and the table of
 * (cos, sin) with YaRN's scaling that it reads, computed at load. */
#include "device_util.cuh"

/* One block per token; threads over (head, pair), then over the values (fp16), or a warp
 * per key or value row of a KV head (fp8: the row's largest magnitude sets its scale). */
template <bool FP8>
__global__ void rope_kv_paged_kernel(float *qkv, KvCache kv, const StepToken *tok,
                                     uint32_t which, const float2 *cos_sin, uint32_t heads,
                                     uint32_t kv_heads, uint32_t hd, uint32_t bt)
{
    grid_wait(); /* see launch() in device_util.cuh */
    grid_launch_next();
    const uint32_t t = blockIdx.x, half = hd / 2;
    const StepToken me = tok[t];
    const uint32_t qw = heads * hd, kvw = kv_heads * hd, width = qw + 2 * kvw;
    float *row = qkv + (size_t)t * width;
    const float2 *cs = cos_sin + (size_t)me.pos * half;
    const size_t block = me.slot[which] / bt, in_block = me.slot[which] % bt;
    for (uint32_t j = threadIdx.x; j < (heads + kv_heads) * half; j += blockDim.x) {
        uint32_t h = j / half, i = j % half;
        float *v = row + (size_t)h * hd; /* q heads, then k heads right after */
        float2 c = cs[i];
        float a = v[i], b = v[i + half];
        float ra = a * c.x - b * c.y, rb = b * c.x + a * c.y;
        v[i] = ra;
        v[i + half] = rb;
        if (!FP8 && h >= heads) {
            kv_t *dst = static_cast<kv_t *>(kv.k) + ((block * kv_heads + (h - heads)) * bt + in_block) * hd;
            dst[i] = to_f16(ra);
            dst[i + half] = to_f16(rb);
        }
    }
    if (!FP8) {
        for (uint32_t j = threadIdx.x; j < kvw; j += blockDim.x)
            static_cast<kv_t *>(kv.v)[((block * kv_heads + j / hd) * bt + in_block) * hd + j % hd] =
                to_f16(row[qw + kvw + j]);
        return;
    }
    __syncthreads(); /* the rotated keys are in the row */
    const uint32_t lane = threadIdx.x & 31;
    for (uint32_t j = threadIdx.x >> 5; j < 2 * kv_heads; j += blockDim.x >> 5) {
        const uint32_t is_v = j / kv_heads, h = j % kv_heads;
        const float *src = row + qw + is_v * kvw + (size_t)h * hd;
        float amax = 0.0f;
        for (uint32_t i = lane; i < hd; i += 32)
            amax = fmaxf(amax, fabsf(src[i]));
#pragma unroll
        for (int o = 16; o; o >>= 1)
            amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));
        amax = fminf(amax, 65504.0f); /* as the fp16 cache saturates */
        const float inv = amax > 0.0f ? GPT_KV_FP8_MAX / amax : 1.0f;
        const size_t cell = (block * kv_heads + h) * bt + in_block;
        uint8_t *dst = static_cast<uint8_t *>(is_v ? kv.v : kv.k) + cell * hd;
        for (uint32_t i = 2 * lane; i < hd; i += 64)
            *reinterpret_cast<uint16_t *>(dst + i) = fp8x2_e4m3(src[i] * inv, src[i + 1] * inv);
        if (lane == 0)
            (is_v ? kv.vscale : kv.kscale)[cell] = amax > 0.0f ? amax / GPT_KV_FP8_MAX : 1.0f;
    }
}

cudaError_t k_rope_kv_paged(float *qkv, KvCache kv, const StepToken *tok, uint32_t which,
                            const float2 *cos_sin, uint32_t T, uint32_t heads, uint32_t kv_heads,
                            uint32_t hd, uint32_t block_tokens, cudaStream_t s)
{
    if (T == 0 || block_tokens == 0 || which > 1 || (kv.kscale && (!kv.vscale || hd % 2)))
        return cudaErrorInvalidValue;
    /* few tokens (decode): 1024 threads take a token's 2,300 pairs and 512 values in 3
     * rounds, not 11 */
    unsigned threads = T < 16 ? 1024 : 256;
    if (kv.kscale)
        LAUNCH(rope_kv_paged_kernel<true>, T, threads, 0, s, qkv, kv, tok, which, cos_sin, heads,
               kv_heads, hd, block_tokens);
    else
        LAUNCH(rope_kv_paged_kernel<false>, T, threads, 0, s, qkv, kv, tok, which, cos_sin, heads,
               kv_heads, hd, block_tokens);
    return cudaGetLastError();
}

/* ---- the RoPE table ---------------------------------------------------------------------- */

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
