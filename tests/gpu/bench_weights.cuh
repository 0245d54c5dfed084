/* What the development benches of the gpt-oss kernels (bench_decode_kernels.cu,
 * bench_step_kernels.cu) share: device memory, pseudo-random fills, and 24 layers' worth
 * of distinct random weights at gpt-oss-20b's shapes (more than the L2 holds, so every
 * launch reads from HBM).  Header-only: each bench is one translation unit. */
#ifndef LLMR_TESTS_GPU_BENCH_WEIGHTS_CUH
#define LLMR_TESTS_GPU_BENCH_WEIGHTS_CUH

#include <stdint.h>

#include <vector>

#include "cuda_ok.h"
#include "kernels.cuh"

static const uint32_t BW_LAYERS = 24, BW_E = 32, BW_H = 2880, BW_I = 2880, BW_QKV = 5120,
                      BW_QW = 4096;

__global__ void fill_bytes(uint8_t *p, size_t n, uint32_t seed, uint8_t lo, uint8_t span)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        uint32_t z = (uint32_t)i * 2654435761u ^ seed;
        z ^= z >> 15;
        z *= 2246822519u;
        z ^= z >> 13;
        p[i] = span ? (uint8_t)(lo + z % span) : (uint8_t)z;
    }
}

/* fp16 values in (-0.05, 0.05) */
__global__ void fill_halves(f16 *p, size_t n, uint32_t seed)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        uint32_t z = (uint32_t)i * 2654435761u ^ seed;
        z ^= z >> 15;
        p[i] = __float2half(((int)(z % 2001) - 1000) * 5e-5f);
    }
}

template <typename T> static T *dev(size_t n)
{
    T *p;
    CUDA_OK(cudaMalloc(&p, n * sizeof(T) + 256));
    return p;
}

/* Each layer's MXFP4 experts (blocks and scales of gate_up and down, scales 2^-9..2^-4)
 * and fp16 QKV, output and router matrices. */
struct BenchLayers {
    std::vector<uint8_t *> gub, gus, dnb, dns;
    std::vector<f16 *> wqkv, wo, wr;
};

static BenchLayers bench_layers(void)
{
    const uint32_t L = BW_LAYERS, E = BW_E, H = BW_H, I = BW_I;
    size_t gu_groups = (size_t)E * 2 * I * (H / 32), dn_groups = (size_t)E * H * (I / 32);
    BenchLayers w;
    for (uint32_t l = 0; l < L; l++) {
        w.gub.push_back(dev<uint8_t>(gu_groups * 16));
        w.gus.push_back(dev<uint8_t>(gu_groups));
        w.dnb.push_back(dev<uint8_t>(dn_groups * 16));
        w.dns.push_back(dev<uint8_t>(dn_groups));
        fill_bytes<<<1024, 256>>>(w.gub[l], gu_groups * 16, 11 * l + 1, 0, 0);
        fill_bytes<<<1024, 256>>>(w.gus[l], gu_groups, 11 * l + 2, 118, 6);
        fill_bytes<<<1024, 256>>>(w.dnb[l], dn_groups * 16, 11 * l + 3, 0, 0);
        fill_bytes<<<1024, 256>>>(w.dns[l], dn_groups, 11 * l + 4, 118, 6);
        w.wqkv.push_back(dev<f16>((size_t)BW_QKV * H));
        w.wo.push_back(dev<f16>((size_t)H * BW_QW));
        w.wr.push_back(dev<f16>((size_t)E * H));
        fill_halves<<<1024, 256>>>(w.wqkv[l], (size_t)BW_QKV * H, l + 5);
        fill_halves<<<1024, 256>>>(w.wo[l], (size_t)H * BW_QW, l + 6);
        fill_halves<<<1024, 256>>>(w.wr[l], (size_t)E * H, l + 7);
    }
    CUDA_OK(cudaGetLastError());
    return w;
}

#endif
