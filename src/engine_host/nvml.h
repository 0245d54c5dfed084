/* GPU memory readings through NVML, the NVIDIA driver's management library.
 *
 * The library is loaded at run time with dlopen, so llmr builds and runs on machines
 * without an NVIDIA driver: there llmr_nvml_open returns NULL with a sentence saying
 * what that means, and the node runs CPU engines only.  No NVIDIA header is needed;
 * nvml.c declares the few NVML types it uses.
 *
 * An llmr_nvml handle owns the loaded library and the NVML session (nvmlInit_v2 at
 * open, nvmlShutdown at close).  NVML is thread-safe and the handle does not change
 * after open, so several threads may read through one handle at once; close it only
 * when no thread uses it any more. */
#ifndef LLMR_ENGINE_HOST_NVML_H
#define LLMR_ENGINE_HOST_NVML_H

#include <stddef.h>
#include <stdint.h>

#include "common/strbuf.h"
#include "llmr/status.h"

/* The library opened when llmr_nvml_open is given NULL. */
#define LLMR_NVML_DEFAULT_LIBRARY "libnvidia-ml.so.1"

/* used_bytes of a process when the driver does not say (some containers, MIG). */
#define LLMR_GPU_BYTES_UNKNOWN UINT64_MAX

typedef struct llmr_gpu_reading {
    uint32_t index;      /* NVML device index (the order of nvidia-smi) */
    char name[96];       /* "NVIDIA H100 80GB HBM3" */
    char uuid[96];       /* "GPU-..." */
    uint64_t total_bytes;
    uint64_t used_bytes;
    uint64_t free_bytes;
    int cc_major, cc_minor; /* CUDA compute capability; 0.0 when the driver cannot tell */
} llmr_gpu_reading;

typedef struct llmr_gpu_process {
    uint32_t pid;        /* as the driver sees it: the host's pid namespace */
    uint64_t used_bytes; /* LLMR_GPU_BYTES_UNKNOWN when not reported */
} llmr_gpu_process;

typedef struct llmr_nvml llmr_nvml;

/* Loads `library` (NULL: LLMR_NVML_DEFAULT_LIBRARY), resolves the entry points and
 * starts NVML.  NULL when NVML is absent or fails, with a sentence in err that says
 * what was tried and what it means for the node, e.g. "NVML not available
 * (libnvidia-ml.so.1: cannot open shared object file: No such file or directory): no
 * GPU memory readings; only CPU engines can run". */
llmr_nvml *llmr_nvml_open(const char *library, llmr_strbuf *err);
/* Shuts NVML down and unloads the library.  NULL is fine. */
void llmr_nvml_close(llmr_nvml *nvml);

/* GPUs NVML saw at open; 0 for NULL. */
uint32_t llmr_nvml_device_count(const llmr_nvml *nvml);

/* Name, UUID, memory and compute capability of GPU `index`.  Errors: INVALID_ARGUMENT
 * (no such index), UNSUPPORTED, IO (the driver or GPU did not answer), with NVML's
 * words in err. */
llmr_status llmr_nvml_read(llmr_nvml *nvml, uint32_t index, llmr_gpu_reading *out,
                           llmr_strbuf *err);

/* The compute processes on GPU `index`: at most cap into out, the number running in
 * *count.  LIMIT_EXCEEDED when more than cap run (*count says how many; out is not
 * filled: ask again with room for them); UNSUPPORTED when the driver has no process
 * query. */
llmr_status llmr_nvml_processes(llmr_nvml *nvml, uint32_t index, llmr_gpu_process *out,
                                size_t cap, size_t *count, llmr_strbuf *err);

#endif
