/* Rows of a step: the embedding of its ids, and the gathering of the rows whose
 * logits are wanted.  See kernels.cuh. */
#include "device_util.cuh"

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

/* ---- rows of a step ----------------------------------------------------------------------- */

__global__ void gather_rows_kernel(float *x, const float *src, const int32_t *rows, uint32_t H)
{
    grid_wait(); /* see launch() in device_util.cuh */
    grid_launch_next();
    const float *from = src + (size_t)rows[blockIdx.x] * H;
    for (uint32_t i = threadIdx.x; i < H; i += blockDim.x)
        x[(size_t)blockIdx.x * H + i] = from[i];
}

cudaError_t k_gather_rows(float *x, const float *src, const int32_t *rows, uint32_t R, uint32_t H,
                          cudaStream_t s)
{
    if (R == 0)
        return cudaErrorInvalidValue;
    LAUNCH(gather_rows_kernel, R, 256, 0, s, x, src, rows, H);
    return cudaGetLastError();
}
