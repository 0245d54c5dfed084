/* ggml's backends for this plugin, once per process: checks that the llama.cpp
 * libraries in the plugin's lib/ are the release its headers are, then loads the
 * backends found there (the prebuilt libraries are built with GGML_BACKEND_DL: the CPU
 * backend is one libggml-cpu-*.so per x86 level, ggml picks the best the CPU runs, and
 * the CUDA backend is libggml-cuda.so).  See lc_engine.h and docs/llama-cpp.md. */
#define _GNU_SOURCE /* dladdr */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "lc_engine.h"
#include "lc_gpu_code.h"

#ifndef LLMR_LC_CUDA
#define LLMR_LC_CUDA 0
#endif
/* What the build's llama.cpp libraries said they are (scripts/llama-cpp.sh writes it,
 * CMake passes it on). */
#ifndef LLMR_LC_GGML_VERSION
#define LLMR_LC_GGML_VERSION "unknown"
#endif
#ifndef LLMR_LC_GGML_COMMIT
#define LLMR_LC_GGML_COMMIT "unknown"
#endif
/* What its GPU code runs on (manifest spelling) and the CUDA version its PTX needs. */
#ifndef LLMR_LC_GPU_TARGETS
#define LLMR_LC_GPU_TARGETS "cpu"
#endif
#ifndef LLMR_LC_PTX_DRIVER
#define LLMR_LC_PTX_DRIVER 0
#endif

static pthread_once_t once = PTHREAD_ONCE_INIT;
static llmr_status status = LLMR_OK;
static char problem[LC_ERROR_MAX];

bool lc_release_matches(const char *have_version, const char *have_commit, const char *want_version,
                        const char *want_commit, char *why, size_t why_size)
{
    have_version = have_version ? have_version : "(none)";
    have_commit = have_commit ? have_commit : "(none)";
    if (strcmp(have_version, want_version) == 0 && strcmp(have_commit, want_commit) == 0)
        return true;
    snprintf(why, why_size,
             "the llama.cpp libraries beside this plugin are ggml %s (commit %s), but the plugin "
             "was built against ggml %s (commit %s); rebuild llmr (make) so that the plugin and "
             "its libraries come from the same llama.cpp release",
             have_version, have_commit, want_version, want_commit);
    return false;
}

/* The directory of this plugin's lib/, where its llama.cpp libraries are. */
static bool lib_dir(char *out, size_t size)
{
    Dl_info info;
    if (!dladdr((const void *)&lc_backends_ready, &info) || !info.dli_fname)
        return false;
    const char *slash = strrchr(info.dli_fname, '/');
    if (!slash)
        return snprintf(out, size, "lib") < (int)size;
    int n = snprintf(out, size, "%.*s/lib", (int)(slash - info.dli_fname), info.dli_fname);
    return n > 0 && (size_t)n < size;
}

static bool has_gpu(void)
{
    for (size_t i = 0; i < ggml_backend_dev_count(); i++)
        if (ggml_backend_dev_type(ggml_backend_dev_get(i)) == GGML_BACKEND_DEVICE_TYPE_GPU)
            return true;
    return false;
}

static void init(void)
{
    if (!lc_release_matches(ggml_version(), ggml_commit(), LLMR_LC_GGML_VERSION,
                            LLMR_LC_GGML_COMMIT, problem, sizeof problem)) {
        status = LLMR_UNSUPPORTED;
        lc_log(LLMR_ENGINE_LOG_ERROR, "%s", problem);
        return;
    }
    char dir[1024];
    if (!lib_dir(dir, sizeof dir)) {
        snprintf(problem, sizeof problem, "cannot find this plugin's own directory (dladdr)");
        status = LLMR_INTERNAL;
        return;
    }
    lc_llama_error_clear();
    ggml_backend_load_all_from_path(dir);
    llama_backend_init();
    if (ggml_backend_dev_count() == 0) {
        snprintf(problem, sizeof problem, "no ggml backend could be loaded from %.512s: %.400s", dir,
                 lc_llama_error()[0] ? lc_llama_error() : "no libggml-cpu-*.so runs on this CPU");
        status = LLMR_UNSUPPORTED;
        return;
    }
    /* The CUDA plugin without its CUDA backend would quietly run on the CPU: say why
     * instead (most often the CUDA 13 runtime, libcudart.so.13 / libcublas.so.13, is not
     * on the library path, or no GPU is visible).  Loads that ask for the CPU go on. */
    if (LLMR_LC_CUDA && !has_gpu())
        snprintf(problem, sizeof problem,
                 "llama.cpp's CUDA backend did not load from %.512s: %.400s", dir,
                 lc_llama_error()[0] ? lc_llama_error()
                                     : "it found no CUDA GPU (is the NVIDIA driver loaded?)");
    lc_log(LLMR_ENGINE_LOG_INFO, "llama.cpp: ggml %s (commit %s), %zu backend device(s) from %s",
           ggml_version(), ggml_commit(), ggml_backend_dev_count(), dir);
}

/* The compute capability of CUDA ordinal `gpu` and the driver's CUDA version, from the
 * driver library (values of cuda.h's CUdevice_attribute).  False when it cannot say. */
#define CU_ATTRIBUTE_CC_MAJOR 75
#define CU_ATTRIBUTE_CC_MINOR 76
static bool gpu_of(int gpu, int *cc_major, int *cc_minor, int *driver)
{
    void *cuda = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL);
    if (!cuda)
        return false;
    int (*cu_init)(unsigned) = (int (*)(unsigned))dlsym(cuda, "cuInit");
    int (*cu_version)(int *) = (int (*)(int *))dlsym(cuda, "cuDriverGetVersion");
    int (*cu_device)(int *, int) = (int (*)(int *, int))dlsym(cuda, "cuDeviceGet");
    int (*cu_attribute)(int *, int, int) = (int (*)(int *, int, int))dlsym(cuda, "cuDeviceGetAttribute");
    int device = 0;
    bool ok = cu_init && cu_version && cu_device && cu_attribute && cu_init(0) == 0 &&
              cu_version(driver) == 0 && cu_device(&device, gpu) == 0 &&
              cu_attribute(cc_major, CU_ATTRIBUTE_CC_MAJOR, device) == 0 &&
              cu_attribute(cc_minor, CU_ATTRIBUTE_CC_MINOR, device) == 0;
    dlclose(cuda);
    return ok;
}

llmr_status lc_backends_ready(int gpu)
{
    pthread_once(&once, init);
    if (status != LLMR_OK) {
        lc_set_error("%s", problem);
        return status;
    }
    if (gpu < 0)
        return LLMR_OK;
    if (problem[0]) {
        lc_set_error("%s", problem);
        return LLMR_UNSUPPORTED;
    }
    /* ggml aborts the process on a kernel the driver cannot load: refuse such a GPU here. */
    int major, minor, driver;
    if (gpu_of(gpu, &major, &minor, &driver) &&
        !lc_gpu_code_runs_on(LLMR_LC_GPU_TARGETS, LLMR_LC_PTX_DRIVER, major, minor, driver)) {
        char why[LC_ERROR_MAX];
        lc_gpu_code_why_not(LLMR_LC_GPU_TARGETS, LLMR_LC_PTX_DRIVER, gpu, major, minor, driver, why,
                            sizeof why);
        lc_set_error("%s", why);
        return LLMR_UNSUPPORTED;
    }
    return LLMR_OK;
}
