/* The dense products through cuBLAS when the machine has it (blas_gemm.cu says how and
 * why): the same products as k_gemm_f16 (kernels.cuh), another implementation. */
#pragma once

#include <cuda_fp16.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct BlasGemm BlasGemm;

#define BLAS_GEMM_WORKSPACE_BYTES (32u << 20) /* device memory a BlasGemm holds */

/* A cuBLAS handle with its workspace, for one thread at a time; NULL, with the reason in
 * why, when libcublas.so.13 is not on the machine or does not start. */
BlasGemm *blas_gemm_open(char *why, size_t why_len);
void blas_gemm_close(BlasGemm *b); /* NULL is fine */

/* Whether a step's product of M rows goes to cuBLAS rather than k_gemm_f16: QKV and the
 * output projection (which k_gemm_f16 may split along K) from 65 rows, where cuBLAS is
 * faster; up to 64 rows k_gemm_f16 with K split is as fast or faster (an H100: 28.9 +
 * 27.0 us a layer against 32.5 + 31.1 at 64 rows; 36.8 + 27.0 against 80.7 + 74.5 at
 * 256; BENCHMARKS.md).  lm_head (no split of K) at any number of rows. */
static inline bool blas_gemm_preferred(uint32_t M, bool k_may_split)
{
    return !k_may_split || M >= 65;
}

/* C fp32 [M][N] = A [M][K] . B [N][K]^T (+ A_lo . B^T when A_lo: split fp16 A) + bias[N]
 * (bias may be NULL; C += when accumulate), fp16 operands, fp32 sums, on stream s.  A
 * cuBLAS failure is cudaErrorUnknown. */
cudaError_t blas_gemm_f16(BlasGemm *b, float *C, const __half *A, const __half *A_lo, const __half *B,
                          const float *bias, uint32_t M, uint32_t N, uint32_t K, int accumulate,
                          cudaStream_t s);
