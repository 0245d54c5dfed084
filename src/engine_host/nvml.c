/* NVML through dlopen: see nvml.h.
 *
 * The NVML types below are declared here from the library's documented ABI; only
 * the versioned entry points are used, so the layouts match what each one takes. */
#include "engine_host/nvml.h"

#include <dlfcn.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* --- The NVML ABI, as much of it as llmr uses --------------------------------- */

typedef int nvmlReturn_t;
typedef struct nvml_device_opaque *nvmlDevice_t;

enum {
    NVML_SUCCESS = 0,
    NVML_ERROR_UNINITIALIZED = 1,
    NVML_ERROR_INVALID_ARGUMENT = 2,
    NVML_ERROR_NOT_SUPPORTED = 3,
    NVML_ERROR_NO_PERMISSION = 4,
    NVML_ERROR_NOT_FOUND = 6,
    NVML_ERROR_INSUFFICIENT_SIZE = 7,
    NVML_ERROR_DRIVER_NOT_LOADED = 9,
    NVML_ERROR_TIMEOUT = 10,
    NVML_ERROR_GPU_IS_LOST = 15,
    NVML_ERROR_LIB_RM_VERSION_MISMATCH = 18,
    NVML_ERROR_MEMORY = 20,
    NVML_ERROR_UNKNOWN = 999,
};

typedef struct nvmlMemory_t {
    unsigned long long total;
    unsigned long long free;
    unsigned long long used;
} nvmlMemory_t;

/* What the unversioned process query fills. */
typedef struct nvmlProcessInfo_v1_t {
    unsigned int pid;
    unsigned long long usedGpuMemory;
} nvmlProcessInfo_v1_t;

/* What _v2 and _v3 fill. */
typedef struct nvmlProcessInfo_t {
    unsigned int pid;
    unsigned long long usedGpuMemory;
    unsigned int gpuInstanceId;
    unsigned int computeInstanceId;
} nvmlProcessInfo_t;

/* A few R535 drivers filled _v3 with 32-byte entries (one more 64-bit field) under
 * the same name.  Buffers are sized for that, so such a driver cannot write past
 * them, and the stride is told apart from the data (see decode_stride). */
#define NVML_PROCESS_STRIDE_MAX 32u

typedef nvmlReturn_t (*nvml_void_fn)(void);
typedef const char *(*nvml_error_string_fn)(nvmlReturn_t);
typedef nvmlReturn_t (*nvml_count_fn)(unsigned int *);
typedef nvmlReturn_t (*nvml_handle_fn)(unsigned int, nvmlDevice_t *);
typedef nvmlReturn_t (*nvml_string_fn)(nvmlDevice_t, char *, unsigned int);
typedef nvmlReturn_t (*nvml_memory_fn)(nvmlDevice_t, nvmlMemory_t *);
typedef nvmlReturn_t (*nvml_cc_fn)(nvmlDevice_t, int *, int *);
typedef nvmlReturn_t (*nvml_processes_fn)(nvmlDevice_t, unsigned int *, void *);

struct llmr_nvml {
    void *lib;
    char library[128]; /* as given to dlopen, for messages */
    nvml_void_fn init;
    nvml_void_fn shutdown;
    nvml_error_string_fn error_string;
    nvml_count_fn get_count;
    nvml_handle_fn get_handle;
    nvml_string_fn get_name;
    nvml_string_fn get_uuid;
    nvml_memory_fn get_memory;
    nvml_cc_fn get_cc;              /* NULL: compute capability unknown */
    nvml_processes_fn get_processes; /* NULL: no process query */
    const char *processes_name;
    size_t process_stride;           /* bytes per entry of get_processes */
    uint32_t device_count;
};

/* dlsym into a function pointer without converting an object pointer to a function
 * pointer (which ISO C leaves undefined): copy the bits. */
static bool resolve(void *lib, const char *name, void *fn, size_t fn_size)
{
    void *sym = dlsym(lib, name);
    if (!sym)
        return false;
    memcpy(fn, &sym, fn_size);
    return true;
}

#define RESOLVE(lib, name, field) resolve((lib), (name), &(field), sizeof(field))

static const char *nvml_words(const llmr_nvml *nvml, nvmlReturn_t rc)
{
    const char *s = nvml->error_string ? nvml->error_string(rc) : NULL;
    return s ? s : "unknown NVML error";
}

static llmr_status status_of(nvmlReturn_t rc)
{
    switch (rc) {
    case NVML_SUCCESS:
        return LLMR_OK;
    case NVML_ERROR_INVALID_ARGUMENT:
    case NVML_ERROR_NOT_FOUND:
        return LLMR_INVALID_ARGUMENT;
    case NVML_ERROR_NOT_SUPPORTED:
        return LLMR_UNSUPPORTED;
    case NVML_ERROR_INSUFFICIENT_SIZE:
        return LLMR_LIMIT_EXCEEDED;
    case NVML_ERROR_TIMEOUT:
        return LLMR_TIMEOUT;
    case NVML_ERROR_MEMORY:
        return LLMR_OOM_RAM;
    case NVML_ERROR_NO_PERMISSION:
    case NVML_ERROR_DRIVER_NOT_LOADED:
    case NVML_ERROR_GPU_IS_LOST:
    case NVML_ERROR_LIB_RM_VERSION_MISMATCH:
    case NVML_ERROR_UNKNOWN:
        return LLMR_IO;
    default:
        return LLMR_INTERNAL;
    }
}

static const char *const no_gpu_meaning = "no GPU memory readings; only CPU engines can run";

llmr_nvml *llmr_nvml_open(const char *library, llmr_strbuf *err)
{
    if (!library || !library[0])
        library = LLMR_NVML_DEFAULT_LIBRARY;
    dlerror();
    void *lib = dlopen(library, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        const char *why = dlerror();
        if (!why)
            why = "cannot be loaded";
        /* dlerror usually starts with the library's name; make sure it is there. */
        if (strstr(why, library))
            llmr_strbuf_printf(err, "NVML not available (%s): %s", why, no_gpu_meaning);
        else
            llmr_strbuf_printf(err, "NVML not available (%s: %s): %s", library, why,
                               no_gpu_meaning);
        return NULL;
    }
    llmr_nvml *nvml = calloc(1, sizeof *nvml);
    if (!nvml) {
        dlclose(lib);
        llmr_strbuf_printf(err, "out of memory opening NVML: %s", no_gpu_meaning);
        return NULL;
    }
    nvml->lib = lib;
    snprintf(nvml->library, sizeof nvml->library, "%s", library);

    const struct {
        const char *name;
        void *fn;
        size_t size;
    } required[] = {
        {"nvmlInit_v2", &nvml->init, sizeof nvml->init},
        {"nvmlShutdown", &nvml->shutdown, sizeof nvml->shutdown},
        {"nvmlErrorString", &nvml->error_string, sizeof nvml->error_string},
        {"nvmlDeviceGetCount_v2", &nvml->get_count, sizeof nvml->get_count},
        {"nvmlDeviceGetHandleByIndex_v2", &nvml->get_handle, sizeof nvml->get_handle},
        {"nvmlDeviceGetName", &nvml->get_name, sizeof nvml->get_name},
        {"nvmlDeviceGetUUID", &nvml->get_uuid, sizeof nvml->get_uuid},
        {"nvmlDeviceGetMemoryInfo", &nvml->get_memory, sizeof nvml->get_memory},
    };
    for (size_t i = 0; i < sizeof required / sizeof required[0]; i++) {
        if (!resolve(lib, required[i].name, required[i].fn, required[i].size)) {
            llmr_strbuf_printf(err,
                               "NVML not usable (%s has no %s: not NVML, or a driver too old): %s",
                               library, required[i].name, no_gpu_meaning);
            goto fail;
        }
    }
    RESOLVE(lib, "nvmlDeviceGetCudaComputeCapability", nvml->get_cc); /* optional */

    /* The newest process query the driver has, with the entry size it fills. */
    static const struct {
        const char *name;
        size_t stride;
    } queries[] = {
        {"nvmlDeviceGetComputeRunningProcesses_v3", sizeof(nvmlProcessInfo_t)},
        {"nvmlDeviceGetComputeRunningProcesses_v2", sizeof(nvmlProcessInfo_t)},
        {"nvmlDeviceGetComputeRunningProcesses", sizeof(nvmlProcessInfo_v1_t)},
    };
    for (size_t i = 0; i < sizeof queries / sizeof queries[0]; i++) {
        if (RESOLVE(lib, queries[i].name, nvml->get_processes)) {
            nvml->processes_name = queries[i].name;
            nvml->process_stride = queries[i].stride;
            break;
        }
    }

    nvmlReturn_t rc = nvml->init();
    if (rc != NVML_SUCCESS) {
        llmr_strbuf_printf(err, "NVML not usable (%s: nvmlInit_v2 failed: %s): %s", library,
                           nvml_words(nvml, rc), no_gpu_meaning);
        goto fail;
    }
    unsigned int count = 0;
    rc = nvml->get_count(&count);
    if (rc != NVML_SUCCESS) {
        llmr_strbuf_printf(err, "NVML not usable (%s: nvmlDeviceGetCount_v2 failed: %s): %s",
                           library, nvml_words(nvml, rc), no_gpu_meaning);
        nvml->shutdown();
        goto fail;
    }
    nvml->device_count = count;
    return nvml;

fail:
    dlclose(lib);
    free(nvml);
    return NULL;
}

void llmr_nvml_close(llmr_nvml *nvml)
{
    if (!nvml)
        return;
    nvml->shutdown();
    dlclose(nvml->lib);
    free(nvml);
}

uint32_t llmr_nvml_device_count(const llmr_nvml *nvml)
{
    return nvml ? nvml->device_count : 0;
}

static llmr_status device_handle(llmr_nvml *nvml, uint32_t index, nvmlDevice_t *dev,
                                 llmr_strbuf *err)
{
    if (!nvml) {
        llmr_strbuf_puts(err, "NVML is not open");
        return LLMR_INVALID_ARGUMENT;
    }
    if (index >= nvml->device_count) {
        llmr_strbuf_printf(err, "GPU %u does not exist: NVML sees %u GPU%s", index,
                           nvml->device_count, nvml->device_count == 1 ? "" : "s");
        return LLMR_INVALID_ARGUMENT;
    }
    nvmlReturn_t rc = nvml->get_handle(index, dev);
    if (rc != NVML_SUCCESS) {
        llmr_strbuf_printf(err, "GPU %u: nvmlDeviceGetHandleByIndex_v2 failed: %s", index,
                           nvml_words(nvml, rc));
        return status_of(rc);
    }
    return LLMR_OK;
}

llmr_status llmr_nvml_read(llmr_nvml *nvml, uint32_t index, llmr_gpu_reading *out,
                           llmr_strbuf *err)
{
    memset(out, 0, sizeof *out);
    out->index = index;
    nvmlDevice_t dev;
    llmr_status st = device_handle(nvml, index, &dev, err);
    if (st != LLMR_OK)
        return st;

    nvmlReturn_t rc = nvml->get_name(dev, out->name, (unsigned int)sizeof out->name);
    if (rc != NVML_SUCCESS) {
        llmr_strbuf_printf(err, "GPU %u: nvmlDeviceGetName failed: %s", index,
                           nvml_words(nvml, rc));
        return status_of(rc);
    }
    out->name[sizeof out->name - 1] = '\0';
    rc = nvml->get_uuid(dev, out->uuid, (unsigned int)sizeof out->uuid);
    if (rc != NVML_SUCCESS) {
        llmr_strbuf_printf(err, "GPU %u: nvmlDeviceGetUUID failed: %s", index,
                           nvml_words(nvml, rc));
        return status_of(rc);
    }
    out->uuid[sizeof out->uuid - 1] = '\0';
    nvmlMemory_t mem;
    rc = nvml->get_memory(dev, &mem);
    if (rc != NVML_SUCCESS) {
        llmr_strbuf_printf(err, "GPU %u: nvmlDeviceGetMemoryInfo failed: %s", index,
                           nvml_words(nvml, rc));
        return status_of(rc);
    }
    out->total_bytes = mem.total;
    out->used_bytes = mem.used;
    out->free_bytes = mem.free;
    if (nvml->get_cc) {
        int major = 0, minor = 0;
        if (nvml->get_cc(dev, &major, &minor) == NVML_SUCCESS) {
            out->cc_major = major;
            out->cc_minor = minor;
        }
    }
    return LLMR_OK;
}

static uint32_t entry_pid(const unsigned char *buf, size_t stride, size_t i)
{
    unsigned int pid;
    memcpy(&pid, buf + i * stride + offsetof(nvmlProcessInfo_t, pid), sizeof pid);
    return pid;
}

/* The stride the driver really used for n entries.  Read with the documented 24
 * bytes, 32-byte entries put a zero (the low half of the extra field) where the
 * second pid should be; a pid is never 0. */
static size_t decode_stride(const unsigned char *buf, size_t stride, size_t n)
{
    if (stride != sizeof(nvmlProcessInfo_t) || n < 2)
        return stride;
    bool zero_at_documented = false;
    for (size_t i = 0; i < n; i++)
        zero_at_documented |= entry_pid(buf, stride, i) == 0;
    if (!zero_at_documented)
        return stride;
    for (size_t i = 0; i < n; i++)
        if (entry_pid(buf, NVML_PROCESS_STRIDE_MAX, i) == 0)
            return stride;
    return NVML_PROCESS_STRIDE_MAX;
}

llmr_status llmr_nvml_processes(llmr_nvml *nvml, uint32_t index, llmr_gpu_process *out,
                                size_t cap, size_t *count, llmr_strbuf *err)
{
    *count = 0;
    nvmlDevice_t dev;
    llmr_status st = device_handle(nvml, index, &dev, err);
    if (st != LLMR_OK)
        return st;
    if (!nvml->get_processes) {
        llmr_strbuf_printf(err, "%s has no nvmlDeviceGetComputeRunningProcesses: "
                           "GPU processes cannot be listed", nvml->library);
        return LLMR_UNSUPPORTED;
    }
    if (cap > 65536)
        cap = 65536; /* more processes than any GPU runs; keeps the sizes small */
    unsigned char *buf = calloc(cap ? cap : 1, NVML_PROCESS_STRIDE_MAX);
    if (!buf) {
        llmr_strbuf_printf(err, "out of memory listing the processes of GPU %u", index);
        return LLMR_OOM_RAM;
    }
    unsigned int n = (unsigned int)cap;
    nvmlReturn_t rc = nvml->get_processes(dev, &n, buf);
    if (rc == NVML_ERROR_INSUFFICIENT_SIZE) {
        *count = n;
        llmr_strbuf_printf(err, "GPU %u runs %u processes, more than the room for %zu", index,
                           n, cap);
        free(buf);
        return LLMR_LIMIT_EXCEEDED;
    }
    if (rc != NVML_SUCCESS) {
        llmr_strbuf_printf(err, "GPU %u: %s failed: %s", index, nvml->processes_name,
                           nvml_words(nvml, rc));
        free(buf);
        return status_of(rc);
    }
    size_t got = n < cap ? n : cap;
    size_t stride = decode_stride(buf, nvml->process_stride, got);
    for (size_t i = 0; i < got; i++) {
        unsigned long long used;
        memcpy(&used, buf + i * stride + offsetof(nvmlProcessInfo_t, usedGpuMemory),
               sizeof used);
        out[i].pid = entry_pid(buf, stride, i);
        out[i].used_bytes = used == ULLONG_MAX ? LLMR_GPU_BYTES_UNKNOWN : (uint64_t)used;
    }
    *count = got;
    free(buf);
    return LLMR_OK;
}
