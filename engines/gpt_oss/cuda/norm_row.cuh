/* One row's RMSNorm by a block, as k_norm.cu's kernels and the MLP norm fused with the
 * router (k_moe_route.cu) run it: the one body, so that both give the same bits.
 * Included by those two files. */
#ifndef GPT_CUDA_NORM_ROW_CUH
#define GPT_CUDA_NORM_ROW_CUH

#include "device_util.cuh"

/* Row t (xr, this block's) normed into the outputs' row t by the block's first `threads`
 * threads (a multiple of 32, at most blockDim.x; every thread of the block calls it): each
 * reads the values i = threadIdx.x + threads j of xr, so a thread that just wrote them
 * reads its own.  The same threads give the same bits whatever the block's size. */
static __device__ __forceinline__ void rmsnorm_row(f16 *out_h, f16 *out_lo, float *out_f, const float *xr,
                                                   const float *w, uint32_t t, uint32_t H, float eps,
                                                   bool operand_order, uint32_t threads)
{
    const bool mine = threadIdx.x < threads;
    __shared__ float partial[32];
    float ss = 0;
    for (uint32_t i = threadIdx.x; mine && i < H; i += threads)
        ss += xr[i] * xr[i];
    ss = warp_sum(ss);
    if ((threadIdx.x & 31) == 0)
        partial[threadIdx.x >> 5] = ss;
    __syncthreads();
    if (threadIdx.x < 32) {
        float v = threadIdx.x < (threads >> 5) ? partial[threadIdx.x] : 0.0f;
        v = warp_sum(v);
        if (threadIdx.x == 0)
            partial[0] = rsqrtf(v / H + eps);
    }
    __syncthreads();
    float r = partial[0];
    for (uint32_t i = threadIdx.x; mine && i < H; i += threads) {
        float v = w[i] * (xr[i] * r);
        if (out_lo)
            split_f16(v, out_h + (size_t)t * H + i, out_lo + (size_t)t * H + i);
        else if (out_h)
            out_h[(size_t)t * H + (operand_order ? mx_operand_index(i) : i)] = to_f16(v);
        if (out_f)
            out_f[(size_t)t * H + i] = v;
    }
}

#endif
