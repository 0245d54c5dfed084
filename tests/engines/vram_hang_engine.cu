/* A test engine plugin for GPU machines: its load takes GPU memory (load option
 * "vram_mib", else $LLMR_VRAM_HANG_MIB, else 8192) and touches it; each request emits one token, then, unless
 * that was its last, launches a kernel that never ends and waits for it: a request
 * stuck in a GPU kernel, deaf to cancel, as a broken engine would be.  The node's
 * watchdog has to kill the worker, and the driver has to give the memory back.  It
 * runs loopback models (it reads only the vocabulary size of their table).
 * tests/gpu/check_watchdog_vram.sh drives it. */
#include <cuda_runtime.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "llmr/engine.h"
#include "llmr/engine_options.h"

static const llmr_host_api *host;
static thread_local char thread_error[512];

struct llmr_engine_model {
    void *buf;
    size_t bytes;
    int *flag;           /* the hung kernel waits for it to turn nonzero: it never does */
    uint32_t vocab;
    int device;
    char error[512];
};

__global__ void wait_forever(volatile int *flag)
{
    while (*flag == 0)
        __nanosleep(100000);
}

static void set_error(char *buf, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, 512, fmt, ap);
    va_end(ap);
}

static uint64_t vram_bytes(const char *options_json)
{
    const char *env = getenv("LLMR_VRAM_HANG_MIB");
    uint64_t def = env && *env ? strtoull(env, NULL, 10) : 8192;
    return llmr_engine_option_u64(options_json, "vram_mib", def) << 20;
}

static void describe(llmr_engine_info *out)
{
    uint32_t size = out->struct_size;
    memset(out, 0, size < sizeof *out ? size : sizeof *out);
    out->struct_size = size;
    out->name = LLMR_PLUGIN_ID;
    out->version = LLMR_PLUGIN_VERSION;
    out->capabilities = LLMR_ENGINE_CAP_CUDA;
}

static llmr_status estimate(const llmr_engine_model_desc *desc, const llmr_engine_load_params *p,
                            llmr_engine_memory *out)
{
    (void)desc;
    out->struct_size = sizeof *out;
    out->vram_bytes = vram_bytes(p->options_json);
    out->ram_bytes = 0;
    return LLMR_OK;
}

static llmr_status load(const llmr_engine_model_desc *desc, const llmr_engine_load_params *p,
                        llmr_engine_model **out)
{
    *out = NULL;
    uint32_t vocab = 0;
    for (size_t i = 0; i < desc->tensor_count; i++)
        if (strcmp(desc->tensors[i].name, "next_token") == 0)
            vocab = (uint32_t)desc->tensors[i].shape[0];
    if (!vocab) {
        set_error(thread_error, "model %s has no next_token table", desc->name);
        return LLMR_MODEL_CORRUPT;
    }
    llmr_engine_model *m = (llmr_engine_model *)calloc(1, sizeof *m);
    if (!m)
        return LLMR_OOM_RAM;
    m->vocab = vocab;
    m->device = p->gpu_index >= 0 ? p->gpu_index : 0;
    m->bytes = vram_bytes(p->options_json);
    cudaError_t e = cudaSetDevice(m->device);
    if (e == cudaSuccess)
        e = cudaMalloc(&m->buf, m->bytes);
    if (e == cudaSuccess)
        e = cudaMemset(m->buf, 1, m->bytes);
    if (e == cudaSuccess)
        e = cudaMalloc((void **)&m->flag, sizeof(int));
    if (e == cudaSuccess)
        e = cudaMemset(m->flag, 0, sizeof(int));
    if (e == cudaSuccess)
        e = cudaDeviceSynchronize();
    if (e != cudaSuccess) {
        set_error(thread_error, "CUDA: %s (taking %zu MiB on GPU %d)", cudaGetErrorString(e),
                  m->bytes >> 20, m->device);
        cudaFree(m->buf);
        cudaFree(m->flag);
        free(m);
        return e == cudaErrorMemoryAllocation ? LLMR_OOM_VRAM : LLMR_INTERNAL;
    }
    *out = m;
    return LLMR_OK;
}

static void unload(llmr_engine_model *m)
{
    cudaFree(m->buf);
    cudaFree(m->flag);
    free(m);
}

static llmr_status model_info(const llmr_engine_model *m, llmr_engine_model_info *out)
{
    out->struct_size = sizeof *out;
    out->context_length = 4096;
    out->max_batch = 4;
    out->vocab_size = m->vocab;
    return LLMR_OK;
}

struct request {
    llmr_engine_model *m;
    uint64_t id;
    int32_t last;
    uint32_t max_tokens, prompt_len;
    llmr_engine_token_fn on_token;
    void *user;
};

static void *run(void *arg)
{
    struct request *r = (struct request *)arg;
    llmr_engine_token ev;
    memset(&ev, 0, sizeof ev);
    ev.struct_size = sizeof ev;
    ev.request_id = r->id;
    ev.id = (int32_t)(((uint32_t)r->last + 1) % r->m->vocab);
    ev.time_ns = host->now_ns(host->ctx);
    ev.prompt_tokens = r->prompt_len;
    if (r->max_tokens == 1) {
        ev.finish = LLMR_ENGINE_FINISH_LENGTH;
        r->on_token(r->user, &ev);
        free(r);
        return NULL;
    }
    r->on_token(r->user, &ev);
    cudaSetDevice(r->m->device);
    cudaStream_t s;
    cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    wait_forever<<<1, 1, 0, s>>>(r->m->flag);
    cudaStreamSynchronize(s); /* never returns */
    return NULL;
}

static llmr_status submit(llmr_engine_model *m, const llmr_engine_request_params *p,
                          llmr_engine_token_fn on_token, void *user)
{
    struct request *r = (struct request *)calloc(1, sizeof *r);
    if (!r)
        return LLMR_OOM_RAM;
    r->m = m;
    r->id = p->request_id;
    r->last = p->prompt[p->prompt_len - 1];
    r->max_tokens = p->max_tokens;
    r->prompt_len = p->prompt_len;
    r->on_token = on_token;
    r->user = user;
    pthread_t t;
    if (pthread_create(&t, NULL, run, r) != 0) {
        free(r);
        set_error(m->error, "cannot start a thread");
        return LLMR_INTERNAL;
    }
    pthread_detach(t);
    return LLMR_OK;
}

static const char *last_error(const llmr_engine_model *m)
{
    return m ? m->error : thread_error;
}

static llmr_status memory(const llmr_engine_model *m, llmr_engine_memory *out)
{
    out->struct_size = sizeof *out;
    out->vram_bytes = m->bytes;
    out->ram_bytes = 0;
    return LLMR_OK;
}

static llmr_engine_api table;

LLMR_ENGINE_EXPORT llmr_status llmr_engine_negotiate(const llmr_host_api *h,
                                                     const llmr_engine_api **out)
{
    if (!h || h->abi_major != LLMR_ENGINE_ABI_MAJOR)
        return LLMR_ABI_MISMATCH;
    host = h;
    table.struct_size = sizeof table;
    table.abi_major = LLMR_ENGINE_ABI_MAJOR;
    table.abi_minor = LLMR_ENGINE_ABI_MINOR;
    table.describe = describe;
    table.load = load;
    table.unload = unload;
    table.model_info = model_info;
    table.submit = submit;
    table.last_error = last_error;
    table.estimate = estimate;
    table.cancel = NULL; /* deaf to cancel, on purpose */
    table.memory = memory;
    *out = &table;
    return LLMR_OK;
}
