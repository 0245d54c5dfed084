/* RMSNorm of a step's rows, to fp16 (split in two when asked, or in the experts'
 * operand order: kernels.cuh) and/or fp32; and the same after adding the experts'
 * weighted outputs to the rows (the end of a layer and the start of the next in one
 * kernel).  See kernels.cuh. */
#include "device_util.cuh"
#include "norm_row.cuh"


__global__ void rmsnorm_kernel(f16 *out_h, f16 *out_lo, float *out_f, const float *x,
                               const float *w, uint32_t H, float eps, bool operand_order)
{
    grid_wait(); /* see launch() in device_util.cuh */
    grid_launch_next();
    rmsnorm_row(out_h, out_lo, out_f, x + (size_t)blockIdx.x * H, w, blockIdx.x, H, eps, operand_order,
                blockDim.x);
}

/* x[t] += sum over j < k of ew[t][j] out[slot[t][j]] (k_moe_combine's sums, in its order),
 * then x[t]'s RMSNorm in split fp16 (k_rmsnorm's, bit for bit) */
__global__ void combine_rmsnorm_kernel(float *x, const float *out, const int32_t *slot, const float *ew,
                                       uint32_t k, f16 *out_h, f16 *out_lo, const float *w, uint32_t H,
                                       float eps)
{
    grid_wait(); /* see launch() in device_util.cuh */
    grid_launch_next();
    const uint32_t t = blockIdx.x;
    float *xr = x + (size_t)t * H;
    for (uint32_t h = threadIdx.x; h < H; h += blockDim.x) {
        float acc = 0;
        for (uint32_t j = 0; j < k; j++)
            acc += ew[(size_t)t * k + j] * out[(size_t)slot[(size_t)t * k + j] * H + h];
        xr[h] += acc;
    }
    rmsnorm_row(out_h, out_lo, NULL, xr, w, t, H, eps, false, blockDim.x);
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

cudaError_t k_moe_combine_rmsnorm(float *x, const float *out, const int32_t *slot, const float *ew, uint32_t T,
                                  uint32_t k, uint32_t H, f16 *out_h, f16 *out_lo, const float *w, float eps,
                                  cudaStream_t s)
{
    if (!out_h || !out_lo)
        return cudaErrorInvalidValue;
    LAUNCH(combine_rmsnorm_kernel, T, 512, 0, s, x, out, slot, ew, k, out_h, out_lo, w, H, eps);
    return cudaGetLastError();
}
