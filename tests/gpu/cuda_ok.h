/* CUDA_OK(call): the GPU test tools' check of a CUDA runtime call; on failure it prints
 * where and why and exits 2 (the tools' "could not run" status, apart from 1: a check
 * failed). */
#ifndef LLMR_TESTS_GPU_CUDA_OK_H
#define LLMR_TESTS_GPU_CUDA_OK_H

#include <stdio.h>
#include <stdlib.h>

#include <cuda_runtime.h>

#define CUDA_OK(call) \
    do { \
        cudaError_t e_ = (call); \
        if (e_ != cudaSuccess) { \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_)); \
            exit(2); \
        } \
    } while (0)

#endif
