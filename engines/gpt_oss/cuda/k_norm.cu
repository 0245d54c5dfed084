/* RMSNorm of a step's rows, to fp16 (split in two when asked, or in the experts'
 * operand order: kernels.cuh) and/or fp32.  See kernels.cuh. */
#include "device_util.cuh"


__global__ void rmsnorm_kernel(f16 *out_h, f16 *out_lo, float *out_f, const float *x,
                               const float *w, uint32_t H, float eps, bool operand_order)
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
            out_h[(size_t)t * H + (operand_order ? mx_operand_index(i) : i)] = to_f16(v);
        if (out_f)
            out_f[(size_t)t * H + i] = v;
    }
}

cudaError_t k_rmsnorm(f16 *out_h, f16 *out_lo, float *out_f, const float *x, const float *w,
                      uint32_t T, uint32_t H, float eps, cudaStream_t s)
{
    if (out_lo && !out_h)
        return cudaErrorInvalidValue;
    LAUNCH(rmsnorm_kernel, T, 512, 0, s, out_h, out_lo, out_f, x, w, H, eps, false);
    return cudaGetLastError();
}

cudaError_t k_rmsnorm_operand_order(f16 *out_h, float *out_f, const float *x, const float *w, uint32_t T,
                                    uint32_t H, float eps, cudaStream_t s)
{
    if (!out_h || H % 32)
        return cudaErrorInvalidValue;
    LAUNCH(rmsnorm_kernel, T, 512, 0, s, out_h, (f16 *)NULL, out_f, x, w, H, eps, true);
    return cudaGetLastError();
}
