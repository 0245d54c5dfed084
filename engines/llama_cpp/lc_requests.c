/* Requests of the llama.cpp engine: submit, cancel, and the run of one request on a
 * thread and a context of its own.  See lc_engine.h.
 *
 * A run: take a context (an idle one, or a new one while fewer than max_batch exist,
 * else wait), decode the prompt in batches, then sample, report and decode one token
 * at a time until a stop id or an end-of-generation token (STOP), max_tokens or the
 * end of the context (LENGTH), a cancel (CANCELLED) or a failure (ERROR).  The
 * context's KV cache is cleared and the context goes back to the pool. */
#include <stdlib.h>
#include <string.h>

#include "lc_engine.h"

struct lc_request {
    lc_request *next;
    llmr_engine_model *model;
    uint64_t id;
    llmr_engine_request_params p; /* prompt and stop_ids point to the copies below */
    int32_t *prompt, *stop_ids;
    llmr_engine_token_fn on_token;
    void *user;
    struct llama_sampler *sampler;
    atomic_bool cancel;
    pthread_t thread;
};

/* ---- the pool of contexts -------------------------------------------------------- */

struct llama_context_params lc_context_params(const llmr_engine_model *m, uint32_t n_ctx,
                                              uint32_t n_batch)
{
    struct llama_context_params cp = llama_context_default_params();
    cp.n_ctx = n_ctx;
    cp.n_batch = n_batch;
    cp.n_ubatch = n_batch < 512 ? n_batch : 512;
    cp.n_seq_max = 1;
    cp.n_threads = (int32_t)m->threads;
    cp.n_threads_batch = (int32_t)m->threads;
    cp.no_perf = true;
    cp.op_offload = m->gpu >= 0;
    return cp;
}

struct llama_context *lc_new_context(llmr_engine_model *m)
{
    struct llama_context_params cp =
        lc_context_params(m, m->context, m->context < 2048 ? m->context : 2048);
    lc_llama_error_clear();
    struct llama_context *ctx = llama_init_from_model(m->model, cp);
    if (!ctx)
        lc_set_error("cannot create a context of %u tokens for %s%s%s", m->context, m->name,
                     lc_llama_error()[0] ? ": " : "", lc_llama_error());
    return ctx;
}

void lc_free_contexts(llmr_engine_model *m)
{
    for (uint32_t i = 0; i < m->idle_count; i++)
        llama_free(m->idle[i]);
    m->context_count -= m->idle_count;
    m->idle_count = 0;
}

/* A context for r, waiting while max_batch are in use; NULL when the request was
 * cancelled meanwhile or a new context cannot be made (lc_set_error). */
static struct llama_context *take_context(lc_request *r)
{
    llmr_engine_model *m = r->model;
    pthread_mutex_lock(&m->lock);
    for (;;) {
        if (atomic_load(&r->cancel) || m->unloading) {
            pthread_mutex_unlock(&m->lock);
            return NULL;
        }
        if (m->idle_count) {
            struct llama_context *ctx = m->idle[--m->idle_count];
            pthread_mutex_unlock(&m->lock);
            return ctx;
        }
        if (m->context_count < m->max_batch)
            break;
        pthread_cond_wait(&m->changed, &m->lock);
    }
    m->context_count++; /* reserved while it is made, outside the lock */
    pthread_mutex_unlock(&m->lock);
    struct llama_context *ctx = lc_new_context(m);
    if (!ctx) {
        pthread_mutex_lock(&m->lock);
        m->context_count--;
        pthread_cond_broadcast(&m->changed);
        pthread_mutex_unlock(&m->lock);
    }
    return ctx;
}

static void give_back(llmr_engine_model *m, struct llama_context *ctx)
{
    llama_memory_clear(llama_get_memory(ctx), true);
    llama_set_abort_callback(ctx, NULL, NULL);
    pthread_mutex_lock(&m->lock);
    m->idle[m->idle_count++] = ctx;
    pthread_cond_broadcast(&m->changed);
    pthread_mutex_unlock(&m->lock);
}

/* ---- one request ------------------------------------------------------------------ */

static bool is_stop(const lc_request *r, int32_t id)
{
    for (uint32_t i = 0; i < r->p.stop_id_count; i++)
        if (r->stop_ids[i] == id)
            return true;
    return !r->model->ignore_eos && llama_vocab_is_eog(r->model->vocab, id);
}

static bool aborted(void *data)
{
    lc_request *r = data;
    return atomic_load(&r->cancel) || r->model->unloading;
}

/* The last event without a token. */
static void finish(lc_request *r, uint32_t index, uint32_t reason, llmr_status st,
                   const char *message, const char *text, uint32_t text_len)
{
    llmr_engine_token t;
    memset(&t, 0, sizeof t);
    t.struct_size = sizeof t;
    t.request_id = r->id;
    t.index = index;
    t.id = -1;
    t.text = text_len ? text : NULL;
    t.text_len = text_len;
    t.time_ns = lc_now_ns();
    t.finish = reason;
    t.status = st;
    t.message = message;
    t.prompt_tokens = r->p.prompt_len;
    r->on_token(r->user, &t);
}

/* Decodes the prompt in batches of n_batch; 0, or llama_decode's nonzero result. */
static int32_t decode_prompt(lc_request *r, struct llama_context *ctx)
{
    uint32_t n_batch = llama_n_batch(ctx);
    for (uint32_t at = 0; at < r->p.prompt_len; at += n_batch) {
        uint32_t n = r->p.prompt_len - at < n_batch ? r->p.prompt_len - at : n_batch;
        if (aborted(r))
            return 2; /* as llama_decode when its abort callback says so */
        int32_t rc = llama_decode(ctx, llama_batch_get_one(r->prompt + at, (int32_t)n));
        if (rc != 0)
            return rc;
    }
    return 0;
}

static void generate(lc_request *r, struct llama_context *ctx)
{
    llmr_engine_model *m = r->model;
    llama_set_abort_callback(ctx, aborted, r);
    int32_t rc = decode_prompt(r, ctx);
    lc_text text = {{0}, 0};
    char buf[512];
    uint32_t index = 0;
    for (;;) {
        if (rc == 2 || aborted(r)) {
            uint32_t n = lc_text_finish(&text, buf, sizeof buf);
            finish(r, index, LLMR_ENGINE_FINISH_CANCELLED, LLMR_CANCELLED,
                   m->unloading ? "the model was unloaded" : "cancelled", buf, n);
            return;
        }
        if (rc != 0) {
            char msg[LC_ERROR_MAX];
            snprintf(msg, sizeof msg, "llama_decode failed (%d)%s%s", rc,
                     lc_llama_error()[0] ? ": " : "", lc_llama_error());
            /* 1: no room in the KV cache for the batch */
            llmr_status st = rc != 1 ? LLMR_INTERNAL : m->gpu >= 0 ? LLMR_OOM_VRAM : LLMR_OOM_RAM;
            finish(r, index, LLMR_ENGINE_FINISH_ERROR, st, msg, NULL, 0);
            return;
        }
        int32_t id = llama_sampler_sample(r->sampler, ctx, -1);
        llmr_engine_token t;
        memset(&t, 0, sizeof t);
        t.struct_size = sizeof t;
        t.request_id = r->id;
        t.index = index;
        t.id = id;
        int32_t top_ids[LC_MAX_TOP_LOGPROBS];
        float top_lp[LC_MAX_TOP_LOGPROBS];
        if (r->p.logprobs || r->p.top_logprobs) {
            const float *logits = llama_get_logits_ith(ctx, -1);
            if (logits) {
                lc_logprobs(logits, m->vocab_size, id, r->p.top_logprobs, &t.logprob, top_ids,
                            top_lp, &t.top_count);
                t.top_ids = top_ids;
                t.top_logprobs = top_lp;
            }
        }
        t.time_ns = lc_now_ns();
        uint32_t position = r->p.prompt_len + index + 1; /* tokens in the context after it */
        if (is_stop(r, id)) {
            t.finish = LLMR_ENGINE_FINISH_STOP;
        } else {
            t.text_len = lc_text_push(&text, m->vocab, id, buf, sizeof buf);
            if ((r->p.max_tokens && index + 1 >= r->p.max_tokens) || position >= m->context)
                t.finish = LLMR_ENGINE_FINISH_LENGTH;
        }
        if (t.finish != LLMR_ENGINE_FINISH_NONE)
            t.text_len += lc_text_finish(&text, buf + t.text_len, sizeof buf - t.text_len);
        t.text = t.text_len ? buf : NULL;
        if (t.finish != LLMR_ENGINE_FINISH_NONE)
            t.prompt_tokens = r->p.prompt_len;
        int stop = r->on_token(r->user, &t);
        if (t.finish != LLMR_ENGINE_FINISH_NONE)
            return;
        index++;
        if (stop) {
            atomic_store(&r->cancel, true);
            continue; /* ends CANCELLED above */
        }
        rc = llama_decode(ctx, llama_batch_get_one(&id, 1));
    }
}

static void request_free(lc_request *r)
{
    if (r->sampler)
        llama_sampler_free(r->sampler);
    free(r->prompt);
    free(r->stop_ids);
    free(r);
}

/* Unlinks r from the running list; the last one to leave wakes unload(). */
static void request_done(lc_request *r)
{
    llmr_engine_model *m = r->model;
    pthread_mutex_lock(&m->lock);
    for (lc_request **pp = &m->running; *pp; pp = &(*pp)->next)
        if (*pp == r) {
            *pp = r->next;
            break;
        }
    m->in_flight--;
    pthread_cond_broadcast(&m->changed);
    pthread_mutex_unlock(&m->lock);
    request_free(r);
}

static void *run_request(void *arg)
{
    lc_request *r = arg;
    struct llama_context *ctx = take_context(r);
    if (!ctx) {
        if (atomic_load(&r->cancel) || r->model->unloading)
            finish(r, 0, LLMR_ENGINE_FINISH_CANCELLED, LLMR_CANCELLED,
                   r->model->unloading ? "the model was unloaded" : "cancelled", NULL, 0);
        else
            finish(r, 0, LLMR_ENGINE_FINISH_ERROR,
                   r->model->gpu >= 0 ? LLMR_OOM_VRAM : LLMR_OOM_RAM, lc_error(), NULL, 0);
    } else {
        generate(r, ctx);
        give_back(r->model, ctx);
    }
    request_done(r);
    return NULL;
}

/* ---- the ABI's calls ---------------------------------------------------------------- */

llmr_status lc_submit(llmr_engine_model *m, const llmr_engine_request_params *p,
                      llmr_engine_token_fn on_token, void *user)
{
    if (!on_token || !p->prompt || p->prompt_len == 0 || p->prompt_len >= m->context) {
        lc_set_error("the prompt has %u tokens; this model holds 1 to %u", p->prompt_len,
                     m->context - 1);
        return LLMR_UNSUPPORTED;
    }
    for (uint32_t i = 0; i < p->prompt_len; i++)
        if (p->prompt[i] < 0 || p->prompt[i] >= m->vocab_size) {
            lc_set_error("prompt token %u is %d, outside the vocabulary of %d", i, p->prompt[i],
                         m->vocab_size);
            return LLMR_UNSUPPORTED;
        }
    lc_request *r = calloc(1, sizeof *r);
    if (!r) {
        lc_set_error("out of memory for a request");
        return LLMR_OOM_RAM;
    }
    r->model = m;
    r->id = p->request_id;
    memcpy(&r->p, p, p->struct_size < sizeof r->p ? p->struct_size : sizeof r->p);
    r->on_token = on_token;
    r->user = user;
    r->prompt = malloc(p->prompt_len * sizeof *r->prompt);
    r->stop_ids = malloc((p->stop_id_count + 1) * sizeof *r->stop_ids);
    if (!r->prompt || !r->stop_ids) {
        request_free(r);
        lc_set_error("out of memory for a request");
        return LLMR_OOM_RAM;
    }
    memcpy(r->prompt, p->prompt, p->prompt_len * sizeof *r->prompt);
    if (p->stop_id_count)
        memcpy(r->stop_ids, p->stop_ids, p->stop_id_count * sizeof *r->stop_ids);
    r->p.prompt = r->prompt;
    r->p.stop_ids = r->stop_ids;
    r->sampler = lc_sampler_new(&r->p, m->vocab_size, m->context);
    if (!r->sampler) {
        request_free(r);
        return LLMR_UNSUPPORTED;
    }
    pthread_mutex_lock(&m->lock);
    if (m->unloading) {
        pthread_mutex_unlock(&m->lock);
        request_free(r);
        lc_set_error("the model is being unloaded");
        return LLMR_CANCELLED;
    }
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    r->next = m->running;
    m->running = r;
    m->in_flight++;
    int rc = pthread_create(&r->thread, &attr, run_request, r);
    pthread_attr_destroy(&attr);
    if (rc != 0) {
        m->running = r->next;
        m->in_flight--;
        pthread_mutex_unlock(&m->lock);
        request_free(r);
        lc_set_error("cannot start a thread for the request");
        return LLMR_INTERNAL;
    }
    pthread_mutex_unlock(&m->lock);
    return LLMR_OK;
}

llmr_status lc_cancel(llmr_engine_model *m, uint64_t request_id)
{
    pthread_mutex_lock(&m->lock);
    for (lc_request *r = m->running; r; r = r->next)
        if (r->id == request_id)
            atomic_store(&r->cancel, true);
    pthread_cond_broadcast(&m->changed); /* one waiting for a context sees it */
    pthread_mutex_unlock(&m->lock);
    return LLMR_OK;
}

void lc_stop_all(llmr_engine_model *m)
{
    pthread_mutex_lock(&m->lock);
    m->unloading = true;
    for (lc_request *r = m->running; r; r = r->next)
        atomic_store(&r->cancel, true);
    pthread_cond_broadcast(&m->changed);
    while (m->in_flight)
        pthread_cond_wait(&m->changed, &m->lock);
    pthread_mutex_unlock(&m->lock);
}
