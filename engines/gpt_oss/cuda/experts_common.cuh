/* What the experts' product kernels share (k_gemm_mxfp4.cu, k_moe_gemm.cu,
 * k_moe_wgmma.cu): their arguments, the load of a block's MXFP4 scales for all of K,
 * and the store of one output where the lanes hold weight rows (features).  Included by
 * those files only; the API is k_gemm_mxfp4_grouped in kernels.cuh. */
#ifndef GPT_CUDA_EXPERTS_COMMON_CUH
#define GPT_CUDA_EXPERTS_COMMON_CUH

#include "device_util.cuh"

/* One grouped product: the experts' MXFP4 matrices [E][N][K] (blocks, scales) and bias
 * [E][N], the tokens A [..][K] fp16 (a_rows: the token of each slot, or NULL for A in
 * slot order), each expert's slots offsets[e] .. offsets[e + 1]; out C fp32 [slot][N],
 * or with act the clamped SwiGLU (alpha, limit) of (gate, up) = (even, odd) features as
 * fp16 [slot][N/2]. */
struct ExpertsArgs {
    float *C;
    f16 *act;
    const f16 *A;
    const int32_t *a_rows;
    const uint8_t *blocks, *scales;
    const float *bias;
    const uint32_t *offsets;
    uint32_t N, K;
    float alpha, limit;
    bool operand_order; /* act written in the operand order (GPT_MOE_TILE_FRAGMENTS16_OPERAND) */
};

/* Expert e's scales of weight rows n0 .. n0 + ROWS, all of K, into Sc [ROWS][K/32]: one
 * run of cp.async when whole and 16-byte aligned (it lands with the caller's next commit
 * group), else byte by byte (127, 2^0, for rows past N, whose bytes are 0). */
template <int ROWS, int THREADS>
static __device__ __forceinline__ void load_block_scales(uint8_t *Sc, const ExpertsArgs &p, uint32_t e, uint32_t n0,
                                                         uint32_t tid)
{
    const uint32_t N = p.N, KG = p.K / 32;
    const uint8_t *src = p.scales + ((size_t)e * N + n0) * KG;
    if (n0 + ROWS <= N && (ROWS * KG) % 16 == 0 && ((uintptr_t)src & 15) == 0) {
        for (uint32_t i = tid; i < ROWS * KG / 16; i += THREADS)
            cp_async16(Sc + i * 16, src + i * 16, true);
    } else {
        for (uint32_t i = tid; i < ROWS * KG; i += THREADS) {
            uint32_t r = i / KG, n = n0 + r;
            Sc[i] = n < N ? __ldg(p.scales + ((size_t)e * N + n) * KG + i % KG) : 127;
        }
    }
}

/* Output (feature n, slot slot0 + m) of expert e, v before the bias, from a kernel whose
 * lanes hold features as an mma fragment's rows: with act, the (gate, up) pair's up is
 * the next row's, lane + 4's, so every lane of the warp calls this together (a shuffle);
 * outputs past N or past the expert's rows are not written. */
static __device__ __forceinline__ void store_feature_output(const ExpertsArgs &p, uint32_t e, uint32_t slot0,
                                                            uint32_t rows, uint32_t n, uint32_t m, float v,
                                                            uint32_t g)
{
    const uint32_t N = p.N;
    v += p.bias && n < N ? p.bias[(size_t)e * N + n] : 0.0f;
    if (p.act) {
        const float up = __shfl_xor_sync(0xffffffffu, v, 4);
        if (!(g & 1) && n < N && m < rows)
            p.act[((size_t)slot0 + m) * (N / 2) + (p.operand_order ? mx_operand_index(n / 2) : n / 2)] =
                to_f16(clamped_swiglu(v, up, p.alpha, p.limit));
    } else if (n < N && m < rows) {
        p.C[((size_t)slot0 + m) * N + n] = v;
    }
}

#endif
