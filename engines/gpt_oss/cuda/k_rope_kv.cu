/* RoPE (with YaRN's table) for a step of T tokens at positions of their own, and the
 * step's keys and values written into the paged KV cache as fp16 (kernels.cuh:
 * StepToken says where each token's go). */
#include "device_util.cuh"

/* One block per token; threads over (head, pair), then over the values. */
__global__ void rope_kv_paged_kernel(float *qkv, kv_t *kc, kv_t *vc, const StepToken *tok,
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
        if (h >= heads) {
            kv_t *dst = kc + ((block * kv_heads + (h - heads)) * bt + in_block) * hd;
            dst[i] = to_f16(ra);
            dst[i + half] = to_f16(rb);
        }
    }
    for (uint32_t j = threadIdx.x; j < kvw; j += blockDim.x)
        vc[((block * kv_heads + j / hd) * bt + in_block) * hd + j % hd] =
            to_f16(row[qw + kvw + j]);
}

cudaError_t k_rope_kv_paged(float *qkv, kv_t *kc, kv_t *vc, const StepToken *tok, uint32_t which,
                            const float2 *cos_sin, uint32_t T, uint32_t heads, uint32_t kv_heads,
                            uint32_t hd, uint32_t block_tokens, cudaStream_t s)
{
    if (T == 0 || block_tokens == 0 || which > 1)
        return cudaErrorInvalidValue;
    /* few tokens (decode): 1024 threads take a token's 2,300 pairs and 512 values in 3
     * rounds, not 11 */
    LAUNCH(rope_kv_paged_kernel, T, T < 16 ? 1024 : 256, 0, s, qkv, kc, vc, tok, which, cos_sin,
           heads, kv_heads, hd, block_tokens);
    return cudaGetLastError();
}
