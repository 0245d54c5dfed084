/* The loopback engine: an llmr engine plugin that runs loopback models
 * (models/loopback_config.h): after the prompt's last token it emits
 * next_token[previous] step after step.  It implements the whole engine ABI
 * (include/llmr/engine.h) with real threads, per-request KV buffers, cancellation and
 * memory reporting, so the node, its workers and the tools can be exercised and
 * measured without a GPU.  Logprobs are synthetic (a fixed function of the id).
 *
 * A model whose checked config says "mode": "echo_last_user" (models/loopback_config.h)
 * answers with the prompt's last user message instead: the ids after the last
 * echo_user_header up to the prompt's last echo_end_id, then echo_return_id unless
 * they end in one of echo_turn_end_ids, and stops.  (The last end id rather than the
 * next: a message that spells out a whole harmony answer holds <|end|> tokens of its
 * own, and the template's <|end|> closing the last message is the prompt's last.)
 *
 * It links none of llmr's code.  Load options (options_json, all optional):
 *   "token_delay_us": pause before each token (default 0)
 *   "kv_bytes_per_token": bytes of the per-request buffer per token (default 1024)
 *   "max_batch": requests run at once (default 8)
 *   "load_delay_ms": how long a load takes (default 0: a slow load, for the tests of
 *                    what happens meanwhile)
 *
 * The tests build variants of this file (tests/engines/CMakeLists.txt) by defining:
 *   LLMR_PLUGIN_ID / _VERSION        the name and version it describes (the build
 *                                    sets them from the manifest)
 *   LOOPBACK_WRONG_MAJOR             its table claims ABI major + 1
 *   LOOPBACK_NEWER_MINOR             its table is a minor version ahead, with one
 *                                    more function at the end
 *   LOOPBACK_NULL_OPTIONAL           estimate, cancel and memory are NULL
 *   LOOPBACK_CRASH_ON_LOAD           load() crashes the process
 *   LOOPBACK_HANG                    a request emits two tokens, then hangs for good
 *                                    and ignores cancel (a stuck kernel)
 *   LOOPBACK_LEAK                    request buffers are never released
 *   LOOPBACK_FAKE_GPU                memory is reported as GPU memory
 *   LOOPBACK_NO_SYMBOL               llmr_engine_negotiate is not exported
 *   LOOPBACK_SERIAL                  requests take turns: one generates while the
 *                                    others wait inside the engine (as in the queue of
 *                                    an engine that batches by what its KV cache holds) */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "llmr/engine.h"
#include "llmr/engine_options.h"

#ifndef LLMR_PLUGIN_ID
#define LLMR_PLUGIN_ID "loopback"
#endif
#ifndef LLMR_PLUGIN_VERSION
#define LLMR_PLUGIN_VERSION "1.0.0"
#endif

static const llmr_host_api *host;

/* ---- errors -------------------------------------------------------------------- */

static _Thread_local char thread_error[512];

struct llmr_engine_model {
    pthread_mutex_t lock;
    pthread_cond_t changed;
    const int32_t *table; /* mapped by the host */
    uint32_t vocab_size;
    uint32_t context_length;
    uint32_t max_batch;
    uint64_t token_delay_us;
    uint64_t kv_bytes_per_token;
    uint64_t kv_live;     /* bytes held by running requests */
    bool echo;            /* mode echo_last_user: the ids below */
    int32_t echo_header[8], echo_turn_ends[8];
    size_t echo_header_len, echo_turn_end_len;
    int32_t echo_end, echo_return;
    struct request *requests;
    bool unloading;
    char error[512];
};

static void set_thread_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void set_thread_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(thread_error, sizeof thread_error, fmt, ap);
    va_end(ap);
}

static void set_model_error(llmr_engine_model *m, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void set_model_error(llmr_engine_model *m, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    pthread_mutex_lock(&m->lock);
    vsnprintf(m->error, sizeof m->error, fmt, ap);
    pthread_mutex_unlock(&m->lock);
    va_end(ap);
}

static const char *last_error(const llmr_engine_model *model)
{
    return model ? model->error : thread_error;
}

/* ---- describe, estimate, load ----------------------------------------------------- */

static void describe(llmr_engine_info *out)
{
    uint32_t size = out->struct_size;
    memset(out, 0, size < sizeof *out ? size : sizeof *out);
    out->struct_size = size;
    out->name = LLMR_PLUGIN_ID;
    out->version = LLMR_PLUGIN_VERSION;
    out->capabilities = LLMR_ENGINE_CAP_LOGPROBS | LLMR_ENGINE_CAP_BATCHING |
#ifdef LOOPBACK_FAKE_GPU
                        LLMR_ENGINE_CAP_CUDA |
#else
                        LLMR_ENGINE_CAP_CPU |
#endif
#ifndef LOOPBACK_NULL_OPTIONAL
                        LLMR_ENGINE_CAP_CANCEL |
#endif
                        0;
    out->max_top_logprobs = 5;
}

static const llmr_engine_tensor *find_table(const llmr_engine_model_desc *desc)
{
    for (size_t i = 0; i < desc->tensor_count; i++)
        if (strcmp(llmr_engine_desc_tensor(desc, i)->name, "next_token") == 0)
            return llmr_engine_desc_tensor(desc, i);
    return NULL;
}

static llmr_status check_desc(const llmr_engine_model_desc *desc, const llmr_engine_tensor **table)
{
    if (strcmp(desc->runtime, "loopback") != 0) {
        set_thread_error("the loopback engine runs loopback models, not runtime \"%s\"",
                         desc->runtime);
        return LLMR_UNSUPPORTED;
    }
    *table = find_table(desc);
    if (!*table || strcmp((*table)->dtype, "I32") != 0 || (*table)->rank != 1 ||
        (*table)->shape[0] == 0 || (*table)->size != (*table)->shape[0] * 4) {
        set_thread_error("model %s has no next_token I32 table", desc->name);
        return LLMR_MODEL_CORRUPT;
    }
    return LLMR_OK;
}

static uint64_t context_of(const llmr_engine_model_desc *desc, const llmr_engine_load_params *p)
{
    /* The checked config is a flat object too: the same reader serves. */
    uint64_t model_ctx =
        llmr_engine_option_u64(desc->checked_config_json, "max_position_embeddings", 4096);
    return p->context_length && p->context_length < model_ctx ? p->context_length : model_ctx;
}

#ifndef LOOPBACK_NULL_OPTIONAL
static llmr_status estimate(const llmr_engine_model_desc *desc, const llmr_engine_load_params *p,
                            llmr_engine_memory *out)
{
    const llmr_engine_tensor *table;
    llmr_status st = check_desc(desc, &table);
    if (st != LLMR_OK)
        return st;
    uint64_t batch = llmr_engine_option_u64(p->options_json, "max_batch", 8);
    uint64_t need = sizeof(llmr_engine_model) +
                    batch * context_of(desc, p) *
                        llmr_engine_option_u64(p->options_json, "kv_bytes_per_token", 1024);
    out->struct_size = sizeof *out;
#ifdef LOOPBACK_FAKE_GPU
    out->vram_bytes = need;
    out->ram_bytes = 0;
#else
    out->vram_bytes = 0;
    out->ram_bytes = need;
#endif
    return LLMR_OK;
}
#endif

/* The ids of the list at "key" of a flat JSON object (the checked config, written
 * compact by the host): how many, up to max; 0 when it is absent or not a list of
 * ids. */
static size_t option_ids(const char *json, const char *key, int32_t *out, size_t max)
{
    char quoted[64];
    snprintf(quoted, sizeof quoted, "\"%s\":[", key);
    const char *p = json ? strstr(json, quoted) : NULL;
    if (!p)
        return 0;
    p += strlen(quoted);
    size_t n = 0;
    while (n < max && *p >= '0' && *p <= '9') {
        char *end;
        unsigned long v = strtoul(p, &end, 10);
        if (v > INT32_MAX)
            return 0;
        out[n++] = (int32_t)v;
        p = end;
        if (*p == ',')
            p++;
    }
    return *p == ']' ? n : 0;
}

/* The echo mode's ids from the checked config, when it says echo_last_user. */
static llmr_status read_echo(llmr_engine_model *m, const char *config)
{
    if (!config || !strstr(config, "\"mode\":\"echo_last_user\""))
        return LLMR_OK;
    m->echo = true;
    m->echo_header_len = option_ids(config, "echo_user_header", m->echo_header, 8);
    m->echo_turn_end_len = option_ids(config, "echo_turn_end_ids", m->echo_turn_ends, 8);
    uint64_t end = llmr_engine_option_u64(config, "echo_end_id", UINT64_MAX);
    uint64_t ret = llmr_engine_option_u64(config, "echo_return_id", UINT64_MAX);
    if (!m->echo_header_len || !m->echo_turn_end_len || end >= m->vocab_size ||
        ret >= m->vocab_size) {
        set_thread_error("the echo_last_user loopback model's checked config lacks its ids");
        return LLMR_MODEL_CORRUPT;
    }
    m->echo_end = (int32_t)end;
    m->echo_return = (int32_t)ret;
    return LLMR_OK;
}

static void sleep_us(uint64_t us)
{
    struct timespec ts = {(time_t)(us / 1000000u), (long)(us % 1000000u) * 1000};
    while (nanosleep(&ts, &ts) != 0)
        ;
}

static llmr_status load(const llmr_engine_model_desc *desc, const llmr_engine_load_params *p,
                        llmr_engine_model **out)
{
    *out = NULL;
#ifdef LOOPBACK_CRASH_ON_LOAD
    raise(SIGSEGV);
#endif
    const llmr_engine_tensor *table;
    llmr_status st = check_desc(desc, &table);
    if (st != LLMR_OK)
        return st;
    llmr_engine_model *m = calloc(1, sizeof *m);
    if (!m) {
        set_thread_error("out of memory");
        return LLMR_OOM_RAM;
    }
    pthread_mutex_init(&m->lock, NULL);
    pthread_cond_init(&m->changed, NULL);
    m->table = table->data;
    m->vocab_size = (uint32_t)table->shape[0];
    m->context_length = (uint32_t)context_of(desc, p);
    m->max_batch = (uint32_t)llmr_engine_option_u64(p->options_json, "max_batch", 8);
    if (p->max_batch && p->max_batch < m->max_batch)
        m->max_batch = p->max_batch;
    if (m->max_batch == 0)
        m->max_batch = 1;
    m->token_delay_us = llmr_engine_option_u64(p->options_json, "token_delay_us", 0);
    uint64_t load_delay_ms = llmr_engine_option_u64(p->options_json, "load_delay_ms", 0);
    if (load_delay_ms)
        sleep_us(load_delay_ms * 1000u);
    if ((st = read_echo(m, desc->checked_config_json)) != LLMR_OK) {
        pthread_mutex_destroy(&m->lock);
        pthread_cond_destroy(&m->changed);
        free(m);
        return st;
    }
    m->kv_bytes_per_token = llmr_engine_option_u64(p->options_json, "kv_bytes_per_token", 1024);
    char line[256];
    snprintf(line, sizeof line, "loaded %s: vocabulary %u, context %u, batch %u%s", desc->name,
             m->vocab_size, m->context_length, m->max_batch, m->echo ? ", echo_last_user" : "");
    host->log(host->ctx, LLMR_ENGINE_LOG_INFO, line);
    *out = m;
    return LLMR_OK;
}

static llmr_status model_info(const llmr_engine_model *m, llmr_engine_model_info *out)
{
    out->struct_size = sizeof *out;
    out->context_length = m->context_length;
    out->max_batch = m->max_batch;
    out->vocab_size = m->vocab_size;
    return LLMR_OK;
}

/* ---- requests ----------------------------------------------------------------- */

struct request {
    struct request *next;
    llmr_engine_model *model;
    pthread_t thread;
    uint64_t id;
    int32_t last;          /* the previous token */
    uint32_t prompt_len;
    uint32_t max_tokens;
    float temperature;
    uint64_t rng;
    int32_t *stop_ids;
    uint32_t stop_id_count;
    int32_t *echo;         /* echo mode: the answer, echo_len ids */
    uint32_t echo_len;
    bool logprobs;
    uint32_t top_logprobs;
    void *kv;              /* the request's "KV cache" */
    uint64_t kv_bytes;
    llmr_engine_token_fn on_token;
    void *user;
    bool cancel;           /* guarded by model->lock */
    bool done;             /* the thread has sent the last event */
};

static float synthetic_logprob(int32_t id)
{
    return -0.05f * (float)(1 + id % 17);
}

static uint64_t next_random(uint64_t *state)
{
    *state = *state * 6364136223846793005ull + 1442695040888963407ull;
    return *state >> 33;
}

static int32_t next_token(struct request *r, uint32_t i)
{
    const llmr_engine_model *m = r->model;
    if (m->echo)
        return r->echo[i];
    int32_t next = m->table[(uint32_t)r->last % m->vocab_size];
    if (r->temperature > 0) /* sampling: a seeded step beside the table's choice */
        next = m->table[(uint32_t)(next + (int32_t)(next_random(&r->rng) % 3)) % m->vocab_size];
    return next;
}

static bool is_stop(const struct request *r, int32_t id)
{
    for (uint32_t i = 0; i < r->stop_id_count; i++)
        if (r->stop_ids[i] == id)
            return true;
    return false;
}


#ifdef LOOPBACK_LEAK
/* Buffers this variant never gives back, kept reachable so leak checkers of the
 * worker process see a deliberate hold, not a lost pointer. */
static void *leaked[4096];
static size_t leaked_count;
static pthread_mutex_t leaked_lock = PTHREAD_MUTEX_INITIALIZER;
#endif

static void finish(struct request *r, llmr_engine_token *ev)
{
    llmr_engine_model *m = r->model;
    ev->prompt_tokens = r->prompt_len;
#ifdef LOOPBACK_LEAK
    pthread_mutex_lock(&leaked_lock);
    if (leaked_count < sizeof leaked / sizeof leaked[0])
        leaked[leaked_count++] = r->kv;
    pthread_mutex_unlock(&leaked_lock);
#else
    host->free(host->ctx, r->kv);
    pthread_mutex_lock(&m->lock);
    m->kv_live -= r->kv_bytes;
    pthread_mutex_unlock(&m->lock);
#endif
    r->on_token(r->user, ev);
    pthread_mutex_lock(&m->lock);
    r->done = true;
    pthread_cond_broadcast(&m->changed);
    pthread_mutex_unlock(&m->lock);
}

static void *generate_tokens(void *arg)
{
    struct request *r = arg;
    llmr_engine_model *m = r->model;
    uint32_t limit = m->context_length - r->prompt_len;
    if (r->max_tokens && r->max_tokens < limit)
        limit = r->max_tokens;
    int32_t top_ids[5];
    float top_lp[5];
    for (uint32_t i = 0;; i++) {
#ifdef LOOPBACK_HANG
        if (i == 2)
            for (;;) /* stuck for good, deaf to cancel */
                sleep_us(1000000);
#endif
        if (m->token_delay_us)
            sleep_us(m->token_delay_us);
        pthread_mutex_lock(&m->lock);
        bool cancel = r->cancel || m->unloading;
        pthread_mutex_unlock(&m->lock);
        llmr_engine_token ev;
        memset(&ev, 0, sizeof ev);
        ev.struct_size = sizeof ev;
        ev.request_id = r->id;
        ev.index = i;
        ev.status = LLMR_OK;
        if (cancel) {
            ev.id = -1;
            ev.finish = LLMR_ENGINE_FINISH_CANCELLED;
            finish(r, &ev);
            return NULL;
        }
        int32_t id = next_token(r, i);
        ev.id = id;
        ev.time_ns = host->now_ns(host->ctx);
        if (r->logprobs)
            ev.logprob = synthetic_logprob(id);
        if (r->top_logprobs) {
            top_ids[0] = id;
            top_lp[0] = synthetic_logprob(id) + 0.0f;
            for (uint32_t k = 1; k < r->top_logprobs; k++) {
                top_ids[k] = (int32_t)(((uint32_t)id + k) % m->vocab_size);
                top_lp[k] = top_lp[k - 1] - 1.0f;
            }
            ev.top_count = r->top_logprobs;
            ev.top_ids = top_ids;
            ev.top_logprobs = top_lp;
        }
        r->last = id;
        if (is_stop(r, id) || (m->echo && i + 1 == r->echo_len))
            ev.finish = LLMR_ENGINE_FINISH_STOP;
        else if (i + 1 >= limit)
            ev.finish = LLMR_ENGINE_FINISH_LENGTH;
        if (ev.finish) {
            finish(r, &ev);
            return NULL;
        }
        if (r->on_token(r->user, &ev) != 0) {
            pthread_mutex_lock(&m->lock);
            r->cancel = true;
            pthread_mutex_unlock(&m->lock);
        }
    }
}

#ifdef LOOPBACK_SERIAL
static pthread_mutex_t serial_turn = PTHREAD_MUTEX_INITIALIZER;
#endif

/* A request's thread. */
static void *run_request(void *arg)
{
#ifdef LOOPBACK_SERIAL
    pthread_mutex_lock(&serial_turn);
    void *ret = generate_tokens(arg);
    pthread_mutex_unlock(&serial_turn);
    return ret;
#else
    return generate_tokens(arg);
#endif
}

static void free_request(struct request *r)
{
    free(r->echo);
    free(r->stop_ids);
    free(r);
}

/* Joins and frees the requests whose threads are done.  Called with the lock held. */
static void reap(llmr_engine_model *m)
{
    for (struct request **pp = &m->requests; *pp;) {
        struct request *r = *pp;
        if (!r->done) {
            pp = &r->next;
            continue;
        }
        *pp = r->next;
        pthread_mutex_unlock(&m->lock);
        pthread_join(r->thread, NULL);
        pthread_mutex_lock(&m->lock);
        free_request(r);
    }
}

static bool one_of(int32_t id, const int32_t *ids, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (ids[i] == id)
            return true;
    return false;
}

/* Echo mode: the answer to this prompt (see the top of the file) into r->echo. */
static bool make_echo(const llmr_engine_model *m, const int32_t *prompt, uint32_t n,
                      struct request *r)
{
    size_t h = m->echo_header_len;
    uint32_t from = n, to = n;
    for (uint32_t i = n >= h ? n - (uint32_t)h + 1 : 0; i-- > 0;)
        if (memcmp(prompt + i, m->echo_header, h * sizeof *prompt) == 0) {
            from = i + (uint32_t)h;
            break;
        }
    for (uint32_t i = n; i-- > from;)
        if (prompt[i] == m->echo_end) {
            to = i;
            break;
        }
    if (to < from)
        to = from;
    r->echo = malloc(((size_t)(to - from) + 1) * sizeof *r->echo);
    if (!r->echo)
        return false;
    memcpy(r->echo, prompt + from, (size_t)(to - from) * sizeof *prompt);
    r->echo_len = to - from;
    if (!r->echo_len || !one_of(r->echo[r->echo_len - 1], m->echo_turn_ends, m->echo_turn_end_len))
        r->echo[r->echo_len++] = m->echo_return;
    return true;
}

static llmr_status submit(llmr_engine_model *m, const llmr_engine_request_params *p,
                          llmr_engine_token_fn on_token, void *user)
{
    if (!p->prompt || p->prompt_len == 0) {
        set_model_error(m, "the prompt is empty");
        return LLMR_UNSUPPORTED;
    }
    if (p->prompt_len >= m->context_length) {
        set_model_error(m, "the prompt has %u tokens; the context holds %u", p->prompt_len,
                        m->context_length);
        return LLMR_UNSUPPORTED;
    }
    struct request *r = calloc(1, sizeof *r);
    if (!r) {
        set_model_error(m, "out of memory");
        return LLMR_OOM_RAM;
    }
    r->model = m;
    r->id = p->request_id;
    r->last = p->prompt[p->prompt_len - 1];
    r->prompt_len = p->prompt_len;
    r->max_tokens = p->max_tokens;
    r->temperature = p->temperature;
    r->rng = p->seed ^ 0x9E3779B97F4A7C15ull;
    r->logprobs = p->logprobs != 0;
    r->top_logprobs = p->top_logprobs > 5 ? 5 : p->top_logprobs;
    r->on_token = on_token;
    r->user = user;
    if (m->echo && !make_echo(m, p->prompt, p->prompt_len, r)) {
        free(r);
        set_model_error(m, "out of memory");
        return LLMR_OOM_RAM;
    }
    if (p->stop_id_count) {
        r->stop_ids = malloc(p->stop_id_count * sizeof *r->stop_ids);
        if (!r->stop_ids) {
            free_request(r);
            set_model_error(m, "out of memory");
            return LLMR_OOM_RAM;
        }
        memcpy(r->stop_ids, p->stop_ids, p->stop_id_count * sizeof *r->stop_ids);
        r->stop_id_count = p->stop_id_count;
    }
    uint64_t tokens = (uint64_t)p->prompt_len + (p->max_tokens ? p->max_tokens : m->context_length);
    if (tokens > m->context_length)
        tokens = m->context_length;
    r->kv_bytes = tokens * m->kv_bytes_per_token;
    r->kv = host->alloc(host->ctx, r->kv_bytes ? r->kv_bytes : 1);
    if (!r->kv) {
        set_model_error(m, "out of memory for a buffer of %llu bytes",
                        (unsigned long long)r->kv_bytes);
        free_request(r);
        return LLMR_OOM_RAM;
    }
    memset(r->kv, 0, r->kv_bytes); /* touch it: it is resident, as a real cache is */
    pthread_mutex_lock(&m->lock);
    reap(m);
    if (m->unloading) {
        pthread_mutex_unlock(&m->lock);
        host->free(host->ctx, r->kv);
        free_request(r);
        set_model_error(m, "the model is being unloaded");
        return LLMR_CANCELLED;
    }
    m->kv_live += r->kv_bytes;
    r->next = m->requests;
    m->requests = r;
    if (pthread_create(&r->thread, NULL, run_request, r) != 0) {
        m->requests = r->next;
        m->kv_live -= r->kv_bytes;
        pthread_mutex_unlock(&m->lock);
        host->free(host->ctx, r->kv);
        free_request(r);
        set_model_error(m, "cannot start a thread for the request");
        return LLMR_INTERNAL;
    }
    pthread_mutex_unlock(&m->lock);
    return LLMR_OK;
}

#ifndef LOOPBACK_NULL_OPTIONAL
static llmr_status cancel(llmr_engine_model *m, uint64_t request_id)
{
    pthread_mutex_lock(&m->lock);
    for (struct request *r = m->requests; r; r = r->next)
        if (r->id == request_id)
            r->cancel = true;
    pthread_mutex_unlock(&m->lock);
    return LLMR_OK;
}

static llmr_status memory(const llmr_engine_model *cm, llmr_engine_memory *out)
{
    llmr_engine_model *m = (llmr_engine_model *)cm;
    pthread_mutex_lock(&m->lock);
    uint64_t bytes = sizeof *m + m->kv_live;
    pthread_mutex_unlock(&m->lock);
    out->struct_size = sizeof *out;
#ifdef LOOPBACK_FAKE_GPU
    out->vram_bytes = bytes;
    out->ram_bytes = 0;
#else
    out->vram_bytes = 0;
    out->ram_bytes = bytes;
#endif
    return LLMR_OK;
}
#endif

static void unload(llmr_engine_model *m)
{
    pthread_mutex_lock(&m->lock);
    m->unloading = true;
    while (m->requests) {
        reap(m);
        if (m->requests)
            pthread_cond_wait(&m->changed, &m->lock);
    }
    pthread_mutex_unlock(&m->lock);
    pthread_mutex_destroy(&m->lock);
    pthread_cond_destroy(&m->changed);
    free(m);
}

/* ---- the table ------------------------------------------------------------------ */

#ifdef LOOPBACK_NEWER_MINOR
/* The table of a future minor version: 1.0's members, then one more. */
typedef struct future_api {
    llmr_engine_api base;
    llmr_status (*warm_up)(llmr_engine_model *model);
} future_api;

static llmr_status warm_up(llmr_engine_model *model)
{
    (void)model;
    return LLMR_OK;
}
#endif

#ifdef LOOPBACK_NULL_OPTIONAL
#define OPTIONAL(fn) NULL
#else
#define OPTIONAL(fn) fn
#endif

#define API_MEMBERS                                                                        \
    .describe = describe, .load = load, .unload = unload, .model_info = model_info,        \
    .submit = submit, .last_error = last_error, .estimate = OPTIONAL(estimate),            \
    .cancel = OPTIONAL(cancel), .memory = OPTIONAL(memory)

#ifdef LOOPBACK_WRONG_MAJOR
#define TABLE_MAJOR (LLMR_ENGINE_ABI_MAJOR + 1)
#else
#define TABLE_MAJOR LLMR_ENGINE_ABI_MAJOR
#endif

#ifdef LOOPBACK_NEWER_MINOR
static const future_api table = {
    .base = {.struct_size = sizeof(future_api), .abi_major = TABLE_MAJOR,
             .abi_minor = LLMR_ENGINE_ABI_MINOR + 1, API_MEMBERS},
    .warm_up = warm_up,
};
#define TABLE (&table.base)
#else
static const llmr_engine_api table = {.struct_size = sizeof(llmr_engine_api),
                                      .abi_major = TABLE_MAJOR,
                                      .abi_minor = LLMR_ENGINE_ABI_MINOR, API_MEMBERS};
#define TABLE (&table)
#endif

#ifdef LOOPBACK_NO_SYMBOL /* the entry point under another name, not exported */
__attribute__((used)) static llmr_status negotiate_not_exported(const llmr_host_api *h,
                                                                  const llmr_engine_api **out)
#else
LLMR_ENGINE_EXPORT llmr_status llmr_engine_negotiate(const llmr_host_api *h,
                                                     const llmr_engine_api **out)
#endif
{
    if (!h || h->abi_major != LLMR_ENGINE_ABI_MAJOR)
        return LLMR_ABI_MISMATCH;
    host = h;
    *out = TABLE;
    return LLMR_OK;
}
