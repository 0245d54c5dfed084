/* The llama.cpp engine plugin: GGUF models on llama.cpp's C API, on the CPU and, in
 * the plugin built against llama.cpp's CUDA backend, on a GPU.  This file is the ABI
 * table (include/llmr/engine.h): negotiation, describe, load and unload, model info,
 * memory, estimate, last error.  Requests are lc_requests.c.  See lc_engine.h and
 * docs/llama-cpp.md. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lc_engine.h"
#include "llmr/engine_options.h"

#ifndef LLMR_LC_CUDA
#define LLMR_LC_CUDA 0
#endif

static void describe(llmr_engine_info *out)
{
    out->name = LLMR_LC_CUDA ? "llama.cpp-cuda" : "llama.cpp-cpu";
    out->version = LLMR_PLUGIN_VERSION;
    out->capabilities = LLMR_ENGINE_CAP_CPU | LLMR_ENGINE_CAP_LOGPROBS | LLMR_ENGINE_CAP_BATCHING |
                        LLMR_ENGINE_CAP_TEXT | LLMR_ENGINE_CAP_CANCEL |
                        (LLMR_LC_CUDA ? LLMR_ENGINE_CAP_CUDA : 0);
    out->max_top_logprobs = LC_MAX_TOP_LOGPROBS;
}

static const char *last_error(const llmr_engine_model *model)
{
    (void)model;
    return lc_error();
}

/* The model file: dir/primary_file.  NULL with lc_set_error when it is not a GGUF. */
static char *model_path(const llmr_engine_model_desc *desc)
{
    if (!desc->format || strcmp(desc->format, "gguf") != 0 || !desc->runtime ||
        strcmp(desc->runtime, "llama_cpp") != 0) {
        lc_set_error("the llama.cpp engine runs llama_cpp models from gguf, not %s from %s",
                     desc->runtime ? desc->runtime : "(none)", desc->format ? desc->format : "(none)");
        return NULL;
    }
    if (!desc->dir || !desc->primary_file) {
        lc_set_error("the model description names no GGUF file");
        return NULL;
    }
    size_t n = strlen(desc->dir) + strlen(desc->primary_file) + 2;
    char *path = malloc(n);
    if (!path) {
        lc_set_error("out of memory");
        return NULL;
    }
    snprintf(path, n, "%s/%s", desc->dir, desc->primary_file);
    return path;
}

/* Whether this load puts the model on a GPU: the host gives one, this build of
 * llama.cpp has a GPU backend, and the options do not say "cpu": 1. */
static bool on_gpu(const llmr_engine_load_params *p)
{
    return p->gpu_index >= 0 && llama_supports_gpu_offload() &&
           llmr_engine_option_u64(p->options_json, "cpu", 0) == 0;
}

static uint32_t threads_of(const llmr_engine_load_params *p)
{
    uint64_t t = llmr_engine_option_u64(p->options_json, "threads", p->threads);
    if (t && t < 1024)
        return (uint32_t)t;
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (uint32_t)n : 4;
}

/* Weights plus max_batch contexts: what estimate() reports and load() checks. */
static void need_of(const llmr_engine_model_desc *desc, const lc_gguf_shape *s,
                    const llmr_engine_load_params *p, llmr_engine_memory *out)
{
    bool gpu = on_gpu(p);
    uint32_t ctx = lc_context_of(s, p);
    uint64_t contexts = lc_max_batch_of(p, gpu) * lc_context_bytes(s, ctx, ctx < 2048 ? ctx : 2048);
    out->struct_size = sizeof *out;
    /* The weights are mapped from the file: on the GPU they are copied to the device
     * and the mapping is dropped; on the CPU the mapping is the RAM. */
    out->vram_bytes = gpu ? desc->total_bytes + contexts : 0;
    out->ram_bytes = gpu ? (64u << 20) : desc->total_bytes + contexts;
}

/* The CUDA ordinal the load asks for (the host gives one, the options do not say
 * "cpu": 1) in the plugin whose llama.cpp has a GPU backend; -1 for none. */
static int wanted_gpu(const llmr_engine_load_params *p)
{
    return LLMR_LC_CUDA && p->gpu_index >= 0 && llmr_engine_option_u64(p->options_json, "cpu", 0) == 0
               ? p->gpu_index
               : -1;
}

static llmr_status estimate(const llmr_engine_model_desc *desc, const llmr_engine_load_params *p,
                            llmr_engine_memory *out)
{
    llmr_status ready = lc_backends_ready(wanted_gpu(p));
    if (ready != LLMR_OK)
        return ready;
    char *path = model_path(desc);
    if (!path)
        return LLMR_UNSUPPORTED;
    lc_gguf_shape s;
    llmr_status st = lc_read_shape(path, &s);
    free(path);
    if (st == LLMR_OK)
        need_of(desc, &s, p, out);
    return st;
}

/* The free memory of the GPU of CUDA ordinal `gpu` as ggml sees it (0: unknown). */
static uint64_t gpu_free(int gpu)
{
    int seen = 0;
    for (size_t i = 0; i < ggml_backend_dev_count(); i++) {
        ggml_backend_dev_t d = ggml_backend_dev_get(i);
        if (ggml_backend_dev_type(d) != GGML_BACKEND_DEVICE_TYPE_GPU)
            continue;
        if (seen++ == gpu) {
            size_t free_b = 0, total = 0;
            ggml_backend_dev_memory(d, &free_b, &total);
            return free_b;
        }
    }
    return 0;
}

/* A failed llama_model_load_from_file: the status its logged reason points to. */
static llmr_status classify_load_failure(const char *why, bool gpu)
{
    if (strstr(why, "unknown model architecture") || strstr(why, "unknown pre-tokenizer") ||
        strstr(why, "unsupported") || strstr(why, "not supported"))
        return LLMR_UNSUPPORTED;
    if (strstr(why, "out of memory") || strstr(why, "failed to allocate") ||
        strstr(why, "unable to allocate"))
        return gpu ? LLMR_OOM_VRAM : LLMR_OOM_RAM;
    /* The host checked the GGUF header; what llama.cpp refuses past it (tensor data out
     * of the file, wrong shapes, missing tensors or keys) is a corrupt model. */
    return LLMR_MODEL_CORRUPT;
}

static llmr_status check_budget(const llmr_engine_memory *need, const llmr_engine_load_params *p,
                                const char *name)
{
    if (p->vram_budget && need->vram_bytes > p->vram_budget) {
        lc_set_error("%s needs about %llu MiB of GPU memory (weights and %u contexts); the "
                     "budget is %llu MiB",
                     name, (unsigned long long)(need->vram_bytes >> 20),
                     lc_max_batch_of(p, true), (unsigned long long)(p->vram_budget >> 20));
        return LLMR_OOM_VRAM;
    }
    if (p->ram_budget && need->ram_bytes > p->ram_budget) {
        lc_set_error("%s needs about %llu MiB of RAM; the budget is %llu MiB", name,
                     (unsigned long long)(need->ram_bytes >> 20),
                     (unsigned long long)(p->ram_budget >> 20));
        return LLMR_OOM_RAM;
    }
    return LLMR_OK;
}

static void model_free(llmr_engine_model *m)
{
    lc_free_contexts(m);
    if (m->model)
        llama_model_free(m->model);
    pthread_mutex_destroy(&m->lock);
    pthread_cond_destroy(&m->changed);
    free(m->idle);
    free(m);
}

static llmr_status load(const llmr_engine_model_desc *desc, const llmr_engine_load_params *p,
                        llmr_engine_model **out)
{
    *out = NULL;
    llmr_status ready = lc_backends_ready(wanted_gpu(p));
    if (ready != LLMR_OK)
        return ready;
    char *path = model_path(desc);
    if (!path)
        return LLMR_UNSUPPORTED;
    lc_gguf_shape shape;
    llmr_status st = lc_read_shape(path, &shape);
    llmr_engine_memory need;
    if (st == LLMR_OK) {
        need_of(desc, &shape, p, &need);
        st = check_budget(&need, p, desc->name ? desc->name : path);
    }
    llmr_engine_model *m = st == LLMR_OK ? calloc(1, sizeof *m) : NULL;
    if (st == LLMR_OK && !m) {
        lc_set_error("out of memory");
        st = LLMR_OOM_RAM;
    }
    if (st != LLMR_OK) {
        free(path);
        return st;
    }
    pthread_mutex_init(&m->lock, NULL);
    pthread_cond_init(&m->changed, NULL);
    snprintf(m->name, sizeof m->name, "%s", desc->name ? desc->name : desc->primary_file);
    bool gpu = on_gpu(p);
    m->gpu = gpu ? p->gpu_index : -1;
    m->context = lc_context_of(&shape, p);
    m->max_batch = lc_max_batch_of(p, gpu);
    m->threads = threads_of(p);
    m->ignore_eos = llmr_engine_option_u64(p->options_json, "ignore_eos", 0) != 0;
    m->idle = calloc(m->max_batch, sizeof *m->idle);
    if (p->gpu_index >= 0 && !gpu)
        lc_log(LLMR_ENGINE_LOG_WARN, "%s: this llama.cpp build has no GPU backend; running on the CPU",
               m->name);

    struct llama_model_params mp = llama_model_default_params();
    mp.n_gpu_layers = gpu ? -1 : 0;
    mp.split_mode = LLAMA_SPLIT_MODE_NONE;
    mp.main_gpu = gpu ? p->gpu_index : 0;
    /* On the CPU: no device at all (an empty list), so nothing goes to a GPU that a
     * CUDA build would otherwise use; contexts then keep their operations on the CPU
     * too (lc_context_params). */
    static ggml_backend_dev_t no_devices[1] = {NULL};
    if (!gpu)
        mp.devices = no_devices;
    uint64_t free_before = gpu ? gpu_free(p->gpu_index) : 0;
    lc_llama_error_clear();
    m->model = m->idle ? llama_model_load_from_file(path, mp) : NULL;
    if (!m->model) {
        const char *why = m->idle ? lc_llama_error() : "out of memory";
        st = m->idle ? classify_load_failure(why, gpu) : LLMR_OOM_RAM;
        lc_set_error("llama.cpp cannot load %s: %s", desc->primary_file,
                     why[0] ? why : "no reason given (see the log)");
        free(path);
        model_free(m);
        return st;
    }
    free(path);
    m->vocab = llama_model_get_vocab(m->model);
    m->vocab_size = llama_vocab_n_tokens(m->vocab);
    m->weight_bytes = llama_model_size(m->model);
    m->context_bytes = lc_context_bytes(&shape, m->context, m->context < 2048 ? m->context : 2048);
    /* One context now, so a model that cannot run fails its load, not its first
     * request; the others come when requests need them. */
    struct llama_context *first = lc_new_context(m);
    if (!first) {
        st = gpu ? LLMR_OOM_VRAM : LLMR_OOM_RAM;
        model_free(m);
        return st;
    }
    m->idle[m->idle_count++] = first;
    m->context_count = 1;
    if (gpu) {
        uint64_t free_after = gpu_free(p->gpu_index);
        m->vram_measured = free_before > free_after ? free_before - free_after : 0;
    }
    lc_log(LLMR_ENGINE_LOG_INFO,
           "%s: %s, %d-token vocabulary, %u-token contexts, up to %u at once, on %s", m->name,
           shape.architecture, m->vocab_size, m->context, m->max_batch,
           gpu ? "the GPU" : "the CPU");
    *out = m;
    return LLMR_OK;
}

static void unload(llmr_engine_model *m)
{
    if (!m)
        return;
    lc_stop_all(m);
    model_free(m);
}

static llmr_status model_info(const llmr_engine_model *m, llmr_engine_model_info *out)
{
    out->struct_size = sizeof *out;
    out->context_length = m->context;
    out->max_batch = m->max_batch;
    out->vocab_size = (uint32_t)m->vocab_size;
    return LLMR_OK;
}

static llmr_status memory(const llmr_engine_model *model, llmr_engine_memory *out)
{
    llmr_engine_model *m = (llmr_engine_model *)model;
    pthread_mutex_lock(&m->lock);
    uint64_t contexts = (uint64_t)m->context_count * m->context_bytes;
    pthread_mutex_unlock(&m->lock);
    out->struct_size = sizeof *out;
    if (m->gpu >= 0) {
        /* measured at load (weights and the first context), plus the contexts since */
        uint64_t at_load = m->vram_measured ? m->vram_measured : m->weight_bytes + m->context_bytes;
        out->vram_bytes = at_load + (contexts > m->context_bytes ? contexts - m->context_bytes : 0);
        out->ram_bytes = 64u << 20;
    } else {
        out->vram_bytes = 0;
        out->ram_bytes = m->weight_bytes + contexts;
    }
    return LLMR_OK;
}

static llmr_status submit(llmr_engine_model *m, const llmr_engine_request_params *p,
                          llmr_engine_token_fn on_token, void *user)
{
    return lc_submit(m, p, on_token, user);
}

static llmr_status cancel(llmr_engine_model *m, uint64_t request_id)
{
    return lc_cancel(m, request_id);
}

static llmr_status logits(llmr_engine_model *m, const int32_t *ids, uint32_t n, uint32_t first,
                          float *out)
{
    return lc_logits(m, ids, n, first, out);
}

static const llmr_engine_api api = {
    .struct_size = sizeof(llmr_engine_api),
    .abi_major = LLMR_ENGINE_ABI_MAJOR,
    .abi_minor = LLMR_ENGINE_ABI_MINOR,
    .describe = describe,
    .load = load,
    .unload = unload,
    .model_info = model_info,
    .submit = submit,
    .last_error = last_error,
    .estimate = estimate,
    .cancel = cancel,
    .memory = memory,
    .logits = logits,
};

LLMR_ENGINE_EXPORT llmr_status llmr_engine_negotiate(const llmr_host_api *host,
                                                     const llmr_engine_api **out)
{
    if (!host || host->abi_major != LLMR_ENGINE_ABI_MAJOR) {
        lc_set_error("this plugin speaks engine ABI %d.x; the host speaks %d.x",
                     LLMR_ENGINE_ABI_MAJOR, host ? host->abi_major : -1);
        return LLMR_ABI_MISMATCH;
    }
    lc_log_init(host);
    *out = &api;
    return LLMR_OK;
}
