/* Load-time kernels of the gpt-oss CUDA path: bf16 to fp16 in place (counting the
 * values that saturate), the byte range of a tensor (the loader's check of the E8M0
 * scales) and the experts' MXFP4 blocks laid out as the kernels read them.  See
 * kernels.cuh. */
#include "device_util.cuh"


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

__global__ void mxfp4_lay_out_kernel(uint8_t *blocks, size_t groups)
{
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    for (; i < groups; i += (size_t)gridDim.x * blockDim.x) {
        uint4 *at = reinterpret_cast<uint4 *>(blocks) + i;
        const uint4 q = *at;
        uint8_t group[16];
        memcpy(group, &q, 16);
        *at = make_uint4(mxfp4_laid_word(group, 0), mxfp4_laid_word(group, 1), mxfp4_laid_word(group, 2),
                         mxfp4_laid_word(group, 3));
    }
}

cudaError_t k_mxfp4_lay_out(uint8_t *blocks, size_t groups, cudaStream_t s)
{
    if ((uintptr_t)blocks % 16)
        return cudaErrorInvalidValue;
    if (groups == 0)
        return cudaSuccess;
    mxfp4_lay_out_kernel<<<1024, 256, 0, s>>>(blocks, groups);
    return cudaGetLastError();
}
