/* Which GPUs a build of llama.cpp's CUDA backend can run on (lc_gpu_code.c).  Targets
 * are as plugin manifests write them: "sm_86" (machine code for 8.6 and later minors of
 * 8), "sm_90a" (9.0 only), "compute_90" (PTX for 9.0 and later, which the driver compiles
 * when its CUDA version is at least the one that wrote the PTX). */
#ifndef LLMR_LC_GPU_CODE_H
#define LLMR_LC_GPU_CODE_H

#include <stdbool.h>
#include <stddef.h>

/* Whether code for `targets` (space-separated) runs on a GPU of compute capability
 * cc_major.cc_minor under a driver for CUDA `driver` (13000 for 13.0), the PTX needing a
 * driver of at least `ptx_driver`, and anything at all a driver of its CUDA major (the
 * runtime the build links, e.g. libcudart.so.13, needs that). */
bool lc_gpu_code_runs_on(const char *targets, int ptx_driver, int cc_major, int cc_minor,
                         int driver);
/* The sentence that says why not, and what to do. */
void lc_gpu_code_why_not(const char *targets, int ptx_driver, int ordinal, int cc_major,
                         int cc_minor, int driver, char *out, size_t size);

#endif
