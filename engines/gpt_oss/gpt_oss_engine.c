/* The gpt-oss engine plugin (runtime gpt_oss, safetensors with MXFP4 experts): the
 * engine ABI of include/llmr/engine.h over two paths: CUDA (cuda/gpt_cuda.h, when the
 * plugin was built with nvcc and the host gives it a GPU) and the CPU reference
 * (model.h, cpu_forward.h).  A request runs until a stop id (the request's or an EOS id of
 * generation_config.json), max_tokens, the end of the context, or a cancel.  One step
 * loop serves every request of the model together (step_loop.c); on the GPU each step
 * is one forward pass over a paged KV cache (gpu_step.c).  Tokens are picked on the GPU
 * (temperature, top_k, top_p, min_p, the penalties, seed, logprob and top logprobs); the
 * CPU sampler (sampler.h) keeps the tokens seen for the penalties, and samples a row
 * itself only with "host_sampler".
 *
 * Load options (options_json; a switch takes 1 or true, 0 or false): "threads": CPU
 * threads (default: all); "cpu": 1 runs
 * on the CPU even with a GPU; "sequences": requests of full context the GPU's KV cache
 * holds (default 4); "kv_pool_mb": the full-attention layers' KV cache in MiB instead;
 * "ignore_eos": 1 generates through EOS ids (benchmarks); "host_sampler": 1 samples every
 * token on the CPU from its row of logits, as before the GPU's pick took top_k, top_p and
 * min_p (a comparison, and a way around it); "batch_invariant": 1 makes each request's
 * output on the GPU independent of the requests it shares steps with (one order of
 * every sum whatever the batch, at a cost docs/batching.md gives; the CPU path is so
 * already); "kv_dtype": "fp16" (default) or "fp8" (e4m3 with a scale per row: 1.9 times
 * the positions, accuracy in docs/gpt-oss-cuda.md), the GPU's KV cache; "cublas": 0 keeps
 * the dense products of multi-token steps on the engine's own kernels where the CUDA
 * toolkit's cuBLAS is on the machine (default: cuBLAS there).  The host's
 * max_batch is how
 * many requests the step loop runs together (default 16 on the CPU, 256 on the GPU). */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpt_engine.h"
#include "llmr/engine_options.h"

#ifndef LLMR_PLUGIN_ID
#define LLMR_PLUGIN_ID "gpt-oss"
#endif
#ifndef LLMR_PLUGIN_VERSION
#define LLMR_PLUGIN_VERSION "0.1.0"
#endif

#define ERR_MAX GPT_ERR_MAX
#define INITIAL_CACHE 512u

static const llmr_host_api *host;
static _Thread_local char thread_error[ERR_MAX];

const llmr_host_api *gpt_host(void)
{
    return host;
}

static void set_error(char *buf, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void set_error(char *buf, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, ERR_MAX, fmt, ap);
    va_end(ap);
}

/* ---- describe, estimate, load ----------------------------------------------------- */

static void describe(llmr_engine_info *out)
{
    uint32_t size = out->struct_size;
    memset(out, 0, size < sizeof *out ? size : sizeof *out);
    out->struct_size = size;
    out->name = LLMR_PLUGIN_ID;
    out->version = LLMR_PLUGIN_VERSION;
    out->capabilities = LLMR_ENGINE_CAP_CPU | LLMR_ENGINE_CAP_LOGPROBS | LLMR_ENGINE_CAP_CANCEL |
                        LLMR_ENGINE_CAP_BATCHING;
#ifdef LLMR_GPT_CUDA
    out->capabilities |= LLMR_ENGINE_CAP_CUDA;
#endif
    out->max_top_logprobs = GPT_SAMPLER_MAX_TOP_LOGPROBS;
}

static llmr_status check_runtime(const llmr_engine_model_desc *desc)
{
    if (strcmp(desc->runtime, "gpt_oss") != 0 || strcmp(desc->format, "safetensors") != 0) {
        set_error(thread_error, "the gpt-oss engine runs gpt_oss models from safetensors, not "
                                "%s from %s",
                  desc->runtime, desc->format);
        return LLMR_UNSUPPORTED;
    }
    return LLMR_OK;
}

static uint32_t context_of(const gpt_config *c, const llmr_engine_load_params *p)
{
    return p->context_length && p->context_length < c->max_position ? p->context_length
                                                                     : c->max_position;
}

#ifdef LLMR_GPT_CUDA
/* The CUDA path runs when the plugin has it, the host gives a GPU and the options do
 * not ask for the CPU. */
static bool use_gpu(const llmr_engine_load_params *p)
{
    return p->gpu_index >= 0 && llmr_engine_option_u64(p->options_json, "cpu", 0) == 0;
}
#endif

static llmr_status estimate(const llmr_engine_model_desc *desc, const llmr_engine_load_params *p,
                            llmr_engine_memory *out)
{
    gpt_config c;
    llmr_status st = check_runtime(desc);
    if (st == LLMR_OK)
        st = gpt_config_read(&c, desc, thread_error);
    if (st != LLMR_OK)
        return st;
    out->struct_size = sizeof *out;
    out->vram_bytes = 0;
#ifdef LLMR_GPT_CUDA
    if (use_gpu(p)) {
        /* the weights, scratch and one sequence of full context; the mapped files
         * stay in the page cache, which the host does not count against RAM */
        out->vram_bytes = gpt_cuda_estimate(&c, desc->total_bytes, context_of(&c, p));
        out->ram_bytes = gpt_model_ram_estimate(&c, 0, 0);
        return LLMR_OK;
    }
#else
    (void)p; /* the load parameters choose only between paths this build lacks */
#endif
    /* The weights are read in place from the page cache; a request's cache grows
     * with its tokens: count INITIAL_CACHE positions for each request the step loop
     * runs at once. */
    out->ram_bytes = desc->total_bytes +
                     gpt_model_ram_estimate(&c, INITIAL_CACHE, p->max_batch ? p->max_batch : GPT_LOOP_DEFAULT_BATCH);
    return LLMR_OK;
}

#ifdef LLMR_GPT_CUDA
typedef struct upload_progress {
    const char *name;
    uint64_t started_ns;
} upload_progress;

static void log_upload(void *user, uint64_t done, uint64_t total)
{
    const upload_progress *u = user;
    char line[256];
    double s = (double)(host->now_ns(host->ctx) - u->started_ns) / 1e9;
    snprintf(line, sizeof line, "%s: weights to the GPU: %.1f of %.1f GB (%.0f%%), %.1f s",
             u->name, done / 1e9, total / 1e9, total ? 100.0 * done / total : 100.0, s);
    host->log(host->ctx, LLMR_ENGINE_LOG_INFO, line);
}

/* The CUDA path for a bound model.  UNSUPPORTED (a shape or GPU it does not take)
 * leaves e->gpu NULL and returns OK after a warning: the CPU path runs instead. */
static llmr_status load_gpu(llmr_engine_model *e, const llmr_engine_model_desc *desc,
                            const llmr_engine_load_params *p)
{
    upload_progress up = {desc->name, host->now_ns(host->ctx)};
    gpt_cuda_params gp = {0};
    gp.device = p->gpu_index;
    gp.context = e->context;
    gp.sequences = (uint32_t)llmr_engine_option_u64(p->options_json, "sequences", 0);
    gp.kv_pool_bytes = llmr_engine_option_u64(p->options_json, "kv_pool_mb", 0) << 20;
    gp.vram_budget = p->vram_budget;
    gp.batch_invariant = llmr_engine_option_u64(p->options_json, "batch_invariant", 0) != 0;
    gp.own_gemm = llmr_engine_option_u64(p->options_json, "cublas", 1) == 0;
    gp.kv_fp8 = e->kv_fp8;
    gp.progress = log_upload;
    gp.user = &up;
    llmr_status st = gpt_cuda_load(&e->m, &gp, &e->gpu, thread_error);
    char line[ERR_MAX + 512];
    if (st == LLMR_UNSUPPORTED) {
        snprintf(line, sizeof line, "%s: %s; running on the CPU", desc->name, thread_error);
        host->log(host->ctx, LLMR_ENGINE_LOG_WARN, line);
        return LLMR_OK;
    }
    if (st != LLMR_OK)
        return st;
    e->context = gpt_cuda_context(e->gpu);
    gpt_cuda_kv_layout kv;
    gpt_cuda_kv(e->gpu, &kv);
    snprintf(line, sizeof line,
             "%s: %u layers on %s in %.2f s: %.2f GB of VRAM with a KV cache of %llu tokens "
             "(%s, blocks of %u), up to %u tokens a request; dense products: %s%s",
             desc->name, e->m.cfg.layers, gpt_cuda_device_name(e->gpu),
             (double)(host->now_ns(host->ctx) - up.started_ns) / 1e9,
             gpt_cuda_vram_bytes(e->gpu) / 1e9,
             (unsigned long long)kv.full_blocks * kv.block_tokens,
             kv.fp8 ? "fp8 e4m3 with a scale per row" : "fp16", kv.block_tokens, e->context,
             gpt_cuda_dense_products(e->gpu), gp.batch_invariant ? "; batch-invariant: answers independent of the batch" : "");
    host->log(host->ctx, LLMR_ENGINE_LOG_INFO, line);
    return LLMR_OK;
}
#endif

static bool on_gpu(const llmr_engine_model *e)
{
#ifdef LLMR_GPT_CUDA
    return e->gpu != NULL;
#else
    (void)e;
    return false;
#endif
}

/* Frees what load() built, whatever it got to (the loop stopped already or never
 * started; no request left). */
static void model_destroy(llmr_engine_model *e)
{
#ifdef LLMR_GPT_CUDA
    gpt_cuda_free(e->gpu);
#endif
    gpt_model_free(&e->m);
    pthread_mutex_destroy(&e->lock);
    pthread_cond_destroy(&e->changed);
    free(e);
}

static llmr_status load(const llmr_engine_model_desc *desc, const llmr_engine_load_params *p,
                        llmr_engine_model **out)
{
    *out = NULL;
    llmr_status st = check_runtime(desc);
    if (st != LLMR_OK)
        return st;
    llmr_engine_model *e = calloc(1, sizeof *e);
    if (!e) {
        set_error(thread_error, "out of memory");
        return LLMR_OOM_RAM;
    }
    unsigned threads = (unsigned)llmr_engine_option_u64(p->options_json, "threads", p->threads);
    st = gpt_model_bind(&e->m, desc, threads, thread_error);
    if (st != LLMR_OK) {
        free(e);
        return st;
    }
    pthread_mutex_init(&e->lock, NULL);
    pthread_cond_init(&e->changed, NULL);
    e->context = context_of(&e->m.cfg, p);
    e->weight_bytes = desc->total_bytes;
    e->ignore_eos = llmr_engine_option_u64(p->options_json, "ignore_eos", 0) != 0;
    e->host_sampler = llmr_engine_option_u64(p->options_json, "host_sampler", 0) != 0;
    char kv_dtype[16];
    int found = llmr_engine_option_str(p->options_json, "kv_dtype", kv_dtype, sizeof kv_dtype);
    if (found < 0 || (found && strcmp(kv_dtype, "fp16") != 0 && strcmp(kv_dtype, "fp8") != 0)) {
        set_error(thread_error, "the load option kv_dtype is \"fp16\" (the default) or \"fp8\"%s%s%s",
                  found > 0 ? ", not \"" : "", found > 0 ? kv_dtype : "", found > 0 ? "\"" : "");
        model_destroy(e);
        return LLMR_INVALID_ARGUMENT;
    }
    e->kv_fp8 = found > 0 && strcmp(kv_dtype, "fp8") == 0;
#ifdef LLMR_GPT_CUDA
    if (use_gpu(p) && (st = load_gpu(e, desc, p)) != LLMR_OK) {
        model_destroy(e);
        return st;
    }
#endif
    if (!gpt_loop_start(e, p->max_batch, thread_error)) {
        model_destroy(e);
        return LLMR_OOM_RAM;
    }
    if (!on_gpu(e)) {
        char line[256];
        snprintf(line, sizeof line, "%s: %u layers, hidden %u, %u experts, CPU path on %u threads",
                 desc->name, e->m.cfg.layers, e->m.cfg.hidden, e->m.cfg.experts,
                 gpt_pool_threads(e->m.pool));
        host->log(host->ctx, LLMR_ENGINE_LOG_INFO, line);
    }
    *out = e;
    return LLMR_OK;
}

static llmr_status model_info(const llmr_engine_model *e, llmr_engine_model_info *out)
{
    /* struct_size stays the host's: 1.2 members only where its struct has them */
    out->context_length = e->context;
    out->max_batch = gpt_loop_max_batch(e);
    if (LLMR_ENGINE_HAS(out, llmr_engine_model_info, kv_capacity_tokens))
        out->kv_capacity_tokens = gpt_loop_kv_capacity(e);
    out->vocab_size = e->m.cfg.vocab;
    return LLMR_OK;
}

static const char *last_error(const llmr_engine_model *e)
{
    return e ? e->error : thread_error;
}

/* ---- requests ------------------------------------------------------------------------ */

bool gpt_request_is_stop(const request *r, int32_t id)
{
    for (uint32_t i = 0; i < r->stop_count; i++)
        if (r->stop_ids[i] == id)
            return true;
    const gpt_config *c = &r->model->m.cfg;
    for (uint32_t i = 0; !r->model->ignore_eos && i < c->n_eos; i++)
        if (c->eos[i] == id)
            return true;
    return false;
}

void gpt_request_end(request *r, llmr_engine_token *ev)
{
    llmr_engine_model *e = r->model;
    ev->prompt_tokens = r->prompt_len;
    r->on_token(r->user, ev);
    pthread_mutex_lock(&e->lock);
    r->done = true;
    pthread_cond_broadcast(&e->changed);
    pthread_mutex_unlock(&e->lock);
}

void gpt_request_fail(request *r, llmr_status st, const char *message)
{
    llmr_engine_token ev;
    memset(&ev, 0, sizeof ev);
    ev.struct_size = sizeof ev;
    ev.request_id = r->id;
    ev.id = -1;
    ev.finish = LLMR_ENGINE_FINISH_ERROR;
    ev.status = st;
    ev.message = message;
    gpt_request_end(r, &ev);
}

static void request_free(request *r)
{
    gpt_sampler_free(r->sampler);
    free(r->row);
    free(r->pen_ids);
    free(r->pen_counts);
    free(r->prompt);
    free(r->stop_ids);
    free(r);
}

/* Joins and frees requests whose threads are done.  With the lock held. */
static void reap(llmr_engine_model *e)
{
    for (request **pp = &e->requests; *pp;) {
        request *r = *pp;
        if (!r->done) {
            pp = &r->next;
            continue;
        }
        *pp = r->next;
        pthread_mutex_unlock(&e->lock);
        request_free(r);
        pthread_mutex_lock(&e->lock);
    }
}

static llmr_status submit(llmr_engine_model *e, const llmr_engine_request_params *p,
                          llmr_engine_token_fn on_token, void *user)
{
    const gpt_config *c = &e->m.cfg;
    if (!p->prompt || p->prompt_len == 0 || p->prompt_len >= e->context) {
        set_error(e->error, "the prompt has %u tokens; this model holds 1 to %u", p->prompt_len,
                  e->context - 1);
        return LLMR_UNSUPPORTED;
    }
    for (uint32_t i = 0; i < p->prompt_len; i++)
        if (p->prompt[i] < 0 || (uint32_t)p->prompt[i] >= c->vocab) {
            set_error(e->error, "prompt token %u is %d, outside the vocabulary of %u", i,
                      p->prompt[i], c->vocab);
            return LLMR_UNSUPPORTED;
        }
    request *r = calloc(1, sizeof *r);
    const char *why = NULL;
    gpt_sampler_params sp = {p->temperature, p->top_p,        p->top_k,
                             p->min_p,       p->repetition_penalty, p->presence_penalty,
                             p->frequency_penalty, p->seed, p->top_logprobs, p->logprobs != 0};
    if (r) {
        r->model = e;
        r->id = p->request_id;
        r->prompt = malloc(p->prompt_len * sizeof *r->prompt);
        r->prompt_len = p->prompt_len;
        r->max_tokens = p->max_tokens;
        r->stop_ids = malloc((p->stop_id_count + 1) * sizeof *r->stop_ids);
        r->stop_count = p->stop_id_count;
        r->on_token = on_token;
        r->user = user;
        r->sampler = gpt_sampler_create(&sp, c->vocab, p->prompt, p->prompt_len, &why);
        /* the GPU's pick does everything the API takes: temperature (greedy below 1e-5),
         * top_k, top_p, min_p, the penalties, the logprob and top_logprobs */
        r->gpu_pick = !e->host_sampler;
        r->top_logprobs = p->top_logprobs;
        r->repetition = p->repetition_penalty;
        r->presence = p->presence_penalty;
        r->frequency = p->frequency_penalty;
        r->temperature = p->temperature;
        r->top_k = p->top_k;
        r->top_p = p->top_p;
        r->min_p = p->min_p;
        r->seed = p->seed;
        r->want_logprob = p->logprobs != 0;
        /* the row the CPU sampler reads (with penalties, for a step whose seen tokens
         * pass what the GPU's pick takes) */
        if (on_gpu(e) && (!r->gpu_pick || (r->sampler && gpt_sampler_penalizes(r->sampler))))
            r->row = malloc((size_t)c->vocab * sizeof *r->row);
    }
    if (!r || !r->prompt || !r->stop_ids || !r->sampler ||
        (on_gpu(e) && (!r->gpu_pick || gpt_sampler_penalizes(r->sampler)) && !r->row)) {
        set_error(e->error, "%s", why ? why : "out of memory");
        if (r)
            request_free(r);
        return why ? LLMR_UNSUPPORTED : LLMR_OOM_RAM;
    }
    memcpy(r->prompt, p->prompt, p->prompt_len * sizeof *r->prompt);
    if (p->stop_id_count)
        memcpy(r->stop_ids, p->stop_ids, p->stop_id_count * sizeof *r->stop_ids);
    pthread_mutex_lock(&e->lock);
    reap(e);
    if (e->unloading) {
        pthread_mutex_unlock(&e->lock);
        set_error(e->error, "the model is being unloaded");
        request_free(r);
        return LLMR_INTERNAL;
    }
    r->next = e->requests;
    e->requests = r;
    gpt_loop_submit(e, r); /* under the model's lock: an unload cannot stop the loop in between */
    pthread_mutex_unlock(&e->lock);
    return LLMR_OK;
}

static llmr_status cancel(llmr_engine_model *e, uint64_t id)
{
    pthread_mutex_lock(&e->lock);
    for (request *r = e->requests; r; r = r->next)
        if (r->id == id && !r->internal)
            atomic_store(&r->cancel, true);
    pthread_mutex_unlock(&e->lock);
    gpt_loop_wake(e);
    return LLMR_OK;
}

static llmr_status memory(const llmr_engine_model *ce, llmr_engine_memory *out)
{
    llmr_engine_model *e = (llmr_engine_model *)ce;
    pthread_mutex_lock(&e->lock);
    uint64_t cache = 0;
    for (request *r = e->requests; r; r = r->next)
        cache += r->cache_bytes;
    pthread_mutex_unlock(&e->lock);
    /* struct_size stays the host's: 1.2 members only where its struct has them */
    if (LLMR_ENGINE_HAS(out, llmr_engine_memory, kv_used_tokens))
        out->kv_used_tokens = gpt_loop_kv_used(e);
    out->vram_bytes = 0;
    out->ram_bytes = cache + gpt_model_ram_estimate(&e->m.cfg, 0, 0);
#ifdef LLMR_GPT_CUDA
    if (e->gpu) { /* the KV cache is allocated once: requests take blocks of it */
        out->vram_bytes = gpt_cuda_vram_bytes(e->gpu);
        out->ram_bytes = gpt_model_ram_estimate(&e->m.cfg, 0, 0);
    }
#endif
    return LLMR_OK;
}

#ifdef LLMR_GPT_CUDA
/* A logits() call on the GPU: a request of the step loop that reads the ids, its rows of
 * logits copied out as its chunks run, and generates nothing. */
typedef struct logits_wait {
    pthread_mutex_t lock;
    pthread_cond_t done_cond;
    bool done;
    llmr_status status;
    char message[ERR_MAX];
} logits_wait;

static int logits_event(void *user, const llmr_engine_token *ev)
{
    logits_wait *w = user;
    if (!ev->finish)
        return 0;
    pthread_mutex_lock(&w->lock);
    w->status = ev->finish == LLMR_ENGINE_FINISH_ERROR ? ev->status
                : ev->finish == LLMR_ENGINE_FINISH_CANCELLED ? LLMR_INTERNAL
                                                             : LLMR_OK;
    snprintf(w->message, sizeof w->message, "%s",
             ev->finish == LLMR_ENGINE_FINISH_CANCELLED ? "the model is being unloaded"
             : ev->message                              ? ev->message
                                                        : "");
    w->done = true;
    pthread_cond_signal(&w->done_cond);
    pthread_mutex_unlock(&w->lock);
    return 0;
}

static llmr_status gpu_logits(llmr_engine_model *e, const int32_t *ids, uint32_t n, uint32_t first,
                              float *out)
{
    if (n >= e->context) {
        set_error(e->error, "logits of %u ids: this model reads at most %u at once", n,
                  e->context - 1);
        return LLMR_UNSUPPORTED;
    }
    if (gpt_loop_is_own_thread(e)) { /* it would wait for itself */
        set_error(e->error, "logits() was called from a token callback; call it from another thread");
        return LLMR_UNSUPPORTED;
    }
    logits_wait w;
    memset(&w, 0, sizeof w);
    pthread_mutex_init(&w.lock, NULL);
    pthread_cond_init(&w.done_cond, NULL);
    request *r = calloc(1, sizeof *r);
    if (r) {
        r->model = e;
        r->internal = true; /* cancel() by id never names it */
        r->prompt = malloc(n * sizeof *r->prompt);
        r->stop_ids = malloc(sizeof *r->stop_ids);
        r->prompt_len = n;
        r->max_tokens = 1;
        r->on_token = logits_event;
        r->user = &w;
        r->logits_out = out;
        r->logits_first = first;
    }
    if (!r || !r->prompt || !r->stop_ids) {
        if (r)
            request_free(r);
        set_error(e->error, "out of memory");
        return LLMR_OOM_RAM;
    }
    memcpy(r->prompt, ids, n * sizeof *ids);
    pthread_mutex_lock(&e->lock);
    reap(e);
    bool unloading = e->unloading;
    if (!unloading) {
        e->logits_calls++; /* unload frees e only once this call is done with it */
        r->next = e->requests;
        e->requests = r;
        gpt_loop_submit(e, r);
    }
    pthread_mutex_unlock(&e->lock);
    if (unloading) {
        request_free(r);
        set_error(e->error, "the model is being unloaded");
        return LLMR_INTERNAL;
    }
    pthread_mutex_lock(&w.lock);
    while (!w.done)
        pthread_cond_wait(&w.done_cond, &w.lock);
    pthread_mutex_unlock(&w.lock);
    pthread_mutex_destroy(&w.lock);
    pthread_cond_destroy(&w.done_cond);
    pthread_mutex_lock(&e->lock);
    if (w.status != LLMR_OK)
        set_error(e->error, "%s", w.message);
    e->logits_calls--;
    pthread_cond_broadcast(&e->changed);
    pthread_mutex_unlock(&e->lock);
    return w.status;
}
#endif

static llmr_status logits_of(llmr_engine_model *e, const int32_t *ids, uint32_t n, uint32_t first,
                             float *out)
{
    if (!ids || first >= n || n > e->context) {
        set_error(e->error, "logits of %u ids from %u: out of range (context %u)", n, first,
                  e->context);
        return LLMR_UNSUPPORTED;
    }
    for (uint32_t i = 0; i < n; i++) /* here, not in the step, which other requests share */
        if (ids[i] < 0 || (uint32_t)ids[i] >= e->m.cfg.vocab) {
            set_error(e->error, "id %u of the input is %d, outside the vocabulary of %u", i, ids[i],
                      e->m.cfg.vocab);
            return LLMR_UNSUPPORTED;
        }
#ifdef LLMR_GPT_CUDA
    if (e->gpu)
        return gpu_logits(e, ids, n, first, out);
#endif
    gpt_state st;
    llmr_status s = gpt_state_init(&st, &e->m, n, n, NULL);
    if (s == LLMR_OK)
        s = gpt_forward(&st, ids, n, out, n - first);
    gpt_state_free(&st);
    if (s != LLMR_OK)
        set_error(e->error, "the forward pass of %u ids failed (%s)", n,
                  s == LLMR_OOM_RAM ? "out of memory" : "an id outside the vocabulary");
    return s;
}

static void unload(llmr_engine_model *e)
{
    pthread_mutex_lock(&e->lock);
    e->unloading = true;
    pthread_mutex_unlock(&e->lock);
    gpt_loop_stop(e); /* every request of the loop has had its last event */
    pthread_mutex_lock(&e->lock);
    while (e->requests || e->logits_calls) {
        reap(e);
        if (e->requests || e->logits_calls)
            pthread_cond_wait(&e->changed, &e->lock);
    }
    pthread_mutex_unlock(&e->lock);
    model_destroy(e);
}

static const llmr_engine_api table = {
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
    .logits = logits_of,
};

LLMR_ENGINE_EXPORT llmr_status llmr_engine_negotiate(const llmr_host_api *h,
                                                     const llmr_engine_api **out)
{
    if (!h || h->abi_major != LLMR_ENGINE_ABI_MAJOR)
        return LLMR_ABI_MISMATCH;
    host = h;
    *out = &table;
    return LLMR_OK;
}
