/* The step loop: one thread per loaded model that serves every request together through
 * the step scheduler (engines/sched/scheduler.h).  submit only queues; each step the
 * loop admits what was submitted, ends what was cancelled, asks the scheduler for a plan
 * (a token for each decoding request, chunks of prompts), runs it, samples the rows that
 * end a sequence, and sends the step's events.
 *
 * On the GPU the plan is one forward pass over the paged KV cache, whose blocks the
 * scheduler hands out (gpu_step.c).  On the CPU each planned chunk runs through the
 * request's own KV cache (cpu_forward.h); the scheduler's blocks only count there.  A
 * request the scheduler preempted is read again from its first token.  See
 * gpt_engine.h. */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gpt_engine.h"
#include "step_trace.h"
#include "llmr/engine_options.h"

#define LOOP_TOKEN_BUDGET (4 * GPT_CHUNK)
#define LOOP_BLOCK_TOKENS 16u
#define LOOP_INITIAL_CACHE 512u

struct gpt_loop {
    llmr_engine_model *e;
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t wake;
    atomic_uint_fast64_t kv_used; /* positions in use after the last step (any thread reads) */
    request *incoming, *incoming_tail; /* FIFO through request.queued */
    bool stopping, poked;
    /* the loop thread's alone: */
    llmr_sched sched;
    llmr_sched_step step;
    int32_t *picked;
    llmr_status *failed;
    uint32_t per_item_cap;
    float *logits; /* one row (the CPU path) */
    gpt_step_trace trace;
#ifdef LLMR_GPT_CUDA
    gpt_gpu_items gpu; /* the GPU path's items */
#endif
};

#ifdef LLMR_GPT_CUDA
static bool loop_on_gpu(const gpt_loop *L)
{
    return L->e->gpu != NULL;
}
#endif

/* ---- ends of a request ------------------------------------------------------------- */

/* Takes r out of the scheduler and frees its cache (before its last event, as the ABI
 * says). */
static void retire(gpt_loop *L, request *r)
{
    if (r->seq)
        llmr_sched_finish(&L->sched, r->seq);
    r->seq = NULL;
    if (r->cpu_open)
        gpt_state_free(&r->cpu);
    r->cpu_open = false;
    pthread_mutex_lock(&L->e->lock);
    r->cache_bytes = 0;
    pthread_mutex_unlock(&L->e->lock);
}

static void end_cancelled(gpt_loop *L, request *r)
{
    retire(L, r);
    llmr_engine_token ev;
    memset(&ev, 0, sizeof ev);
    ev.struct_size = sizeof ev;
    ev.request_id = r->id;
    ev.id = -1;
    ev.finish = LLMR_ENGINE_FINISH_CANCELLED;
    gpt_request_end(r, &ev);
}

static void end_failed(gpt_loop *L, request *r, llmr_status st, const char *why)
{
    retire(L, r);
    gpt_request_fail(r, st, why);
}

/* ---- admission and cancel ------------------------------------------------------------ */

static void admit(gpt_loop *L, request *r, bool stopping)
{
    if (stopping || atomic_load(&r->cancel)) {
        end_cancelled(L, r);
        return;
    }
    char err[LLMR_SCHED_ERR_MAX];
    llmr_status st = llmr_sched_add(&L->sched, r->id, r, r->prompt, r->prompt_len, r->max_tokens,
                                    &r->seq, err);
    if (st != LLMR_OK)
        end_failed(L, r, st, err);
}

/* Ends every request in the scheduler that was cancelled (all of them when stopping). */
static void sweep(gpt_loop *L, bool stopping)
{
    for (int pass = 0; pass < 2; pass++) {
        llmr_sched_seq **list = pass ? L->sched.waiting : L->sched.running;
        uint32_t *n = pass ? &L->sched.n_waiting : &L->sched.n_running;
        for (uint32_t i = 0; i < *n;) {
            request *r = list[i]->user;
            if (stopping || atomic_load(&r->cancel))
                end_cancelled(L, r); /* takes it out of list: i now names the next */
            else
                i++;
        }
    }
}

/* Ends every request in the scheduler with status st (nothing can go on). */
static void fail_all(gpt_loop *L, llmr_status st, const char *why)
{
    while (L->sched.n_running)
        end_failed(L, L->sched.running[0]->user, st, why);
    while (L->sched.n_waiting)
        end_failed(L, L->sched.waiting[0]->user, st, why);
}

/* ---- a step -------------------------------------------------------------------------- */

static bool room_per_item(gpt_loop *L, uint32_t n)
{
    if (n <= L->per_item_cap)
        return true;
    int32_t *p = realloc(L->picked, n * sizeof *p);
    if (p)
        L->picked = p;
    llmr_status *f = realloc(L->failed, n * sizeof *f);
    if (f)
        L->failed = f;
    if (!p || !f)
        return false;
    L->per_item_cap = n;
    return true;
}

/* Runs item i's tokens through its request's cache; samples when the item ends its
 * sequence.  LLMR_OK or why the request fails (r->error says more). */
static llmr_status run_item(gpt_loop *L, const llmr_sched_item *it, int32_t *picked)
{
    request *r = it->seq->user;
    llmr_engine_model *e = L->e;
    if (!r->cpu_open) {
        uint32_t max = it->seq->max_len;
        uint32_t initial = r->prompt_len + LOOP_INITIAL_CACHE < max ? r->prompt_len + LOOP_INITIAL_CACHE : max;
        if (gpt_state_init(&r->cpu, &e->m, max, initial, gpt_host()) != LLMR_OK) {
            snprintf(r->error, sizeof r->error, "not enough memory for the request's KV cache");
            return LLMR_OOM_RAM;
        }
        r->cpu_open = true;
    }
    if (it->start == 0)
        r->cpu.pos = 0; /* first read, or read again after a preemption */
    if (r->cpu.pos != it->start) {
        snprintf(r->error, sizeof r->error, "the cache holds %u tokens, the step starts at %u",
                 r->cpu.pos, it->start);
        return LLMR_INTERNAL;
    }
    llmr_status st = gpt_forward(&r->cpu, it->seq->tokens + it->start, it->count,
                                 it->sample ? L->logits : NULL, it->sample ? 1 : 0);
    if (st != LLMR_OK) {
        snprintf(r->error, sizeof r->error, "the forward pass failed (%s)",
                 st == LLMR_OOM_RAM ? "out of memory" : "past the context");
        return st;
    }
    if (it->sample) {
        gpt_sampler_sample(r->sampler, L->logits, &r->last);
        *picked = r->last.id;
    }
    return LLMR_OK;
}

/* The event of a sampled token; ends the request on a stop id or at its length. */
static void send_token(gpt_loop *L, request *r)
{
    llmr_engine_token ev;
    memset(&ev, 0, sizeof ev);
    ev.struct_size = sizeof ev;
    ev.request_id = r->id;
    if (r->logits_out) { /* a logits() request: its rows are in, nothing to generate */
        ev.id = -1;
        ev.finish = LLMR_ENGINE_FINISH_STOP;
        retire(L, r);
        gpt_request_end(r, &ev);
        return;
    }
    ev.index = r->seq->len - r->seq->prompt_len - 1;
    ev.id = r->last.id;
    ev.logprob = r->last.logprob;
    ev.top_count = r->last.top_count;
    ev.top_ids = r->last.top_ids;
    ev.top_logprobs = r->last.top_logprobs;
    ev.time_ns = gpt_host()->now_ns(gpt_host()->ctx);
    if (gpt_request_is_stop(r, r->last.id))
        ev.finish = LLMR_ENGINE_FINISH_STOP;
    else if (llmr_sched_at_length(r->seq))
        ev.finish = LLMR_ENGINE_FINISH_LENGTH;
    if (ev.finish) {
        retire(L, r);
        gpt_request_end(r, &ev);
    } else if (r->on_token(r->user, &ev) != 0) {
        atomic_store(&r->cancel, true);
    }
}

static void run_step(gpt_loop *L)
{
    llmr_sched_step *st = &L->step;
    if (!room_per_item(L, st->n_items)) {
        for (uint32_t i = 0; i < st->n_items; i++)
            end_failed(L, st->items[i].seq->user, LLMR_OOM_RAM, "out of memory for the step");
        return;
    }
#ifdef LLMR_GPT_CUDA
    if (loop_on_gpu(L)) {
        char err[GPT_ERR_MAX];
        llmr_status s = gpt_gpu_step_run(L->e, &L->gpu, st, L->picked, err);
        if (s != LLMR_OK) { /* nothing of the step happened: every request in it fails */
            /* ending takes a sequence out of the scheduler, and the items point into it */
            uint32_t n = st->n_items;
            request **rs = malloc(n * sizeof *rs);
            for (uint32_t i = 0; rs && i < n; i++)
                rs[i] = st->items[i].seq->user;
            for (uint32_t i = 0; i < n; i++) {
                request *r = rs ? rs[i] : st->items[0].seq->user;
                snprintf(r->error, sizeof r->error, "%s", err);
                end_failed(L, r, s, r->error);
                if (!rs) /* out of memory: end the first, the next step fails the rest */
                    break;
            }
            free(rs);
            st->n_items = 0;
            return;
        }
        for (uint32_t i = 0; i < st->n_items; i++)
            L->failed[i] = LLMR_OK;
    } else
#endif
        for (uint32_t i = 0; i < st->n_items; i++) {
            L->picked[i] = -1;
            L->failed[i] = run_item(L, &st->items[i], &L->picked[i]);
        }
    llmr_sched_commit(&L->sched, st, L->picked);
    pthread_mutex_lock(&L->e->lock);
    for (uint32_t i = 0; i < st->n_items; i++) {
        request *r = st->items[i].seq->user;
        r->cache_bytes = r->cpu_open ? r->cpu.bytes : 0; /* the GPU's cache is one pool */
    }
    pthread_mutex_unlock(&L->e->lock);
    /* events last; a request that fails ends after the loop, since ending takes its
     * sequence out of the scheduler and the items point into it */
    uint32_t n_failed = 0;
    for (uint32_t i = 0; i < st->n_items; i++) {
        request *r = st->items[i].seq->user;
        if (L->failed[i] != LLMR_OK) {
            L->failed[n_failed] = L->failed[i];
            L->picked[n_failed++] = (int32_t)i;
        } else if (st->items[i].sample) {
            send_token(L, r);
        }
    }
    for (uint32_t k = 0; k < n_failed; k++) {
        request *r = st->items[L->picked[k]].seq->user;
        end_failed(L, r, L->failed[k], r->error);
    }
}

/* ---- the thread ---------------------------------------------------------------------- */

static bool idle(const gpt_loop *L)
{
    return L->sched.n_running + L->sched.n_waiting == 0;
}

/* The cache's positions in use: the full-attention pool's blocks (the sliding pool's
 * when the model has no full-attention layers). */
static void publish_kv(gpt_loop *L)
{
    const llmr_sched *s = &L->sched;
    uint64_t blocks = s->p.full_blocks ? llmr_kv_blocks_used(&s->full) : llmr_kv_blocks_used(&s->sliding);
    atomic_store(&L->kv_used, blocks * s->p.block_tokens);
}

static void *loop_main(void *arg)
{
    gpt_loop *L = arg;
    for (;;) {
        publish_kv(L);
        pthread_mutex_lock(&L->lock);
        while (!L->incoming && !L->stopping && !L->poked && idle(L))
            pthread_cond_wait(&L->wake, &L->lock);
        request *in = L->incoming;
        L->incoming = L->incoming_tail = NULL;
        bool stopping = L->stopping;
        L->poked = false;
        pthread_mutex_unlock(&L->lock);

        for (request *r = in, *next; r; r = next) {
            next = r->queued;
            r->queued = NULL;
            admit(L, r, stopping);
        }
        sweep(L, stopping);
        if (idle(L)) {
            if (stopping)
                return NULL;
            continue;
        }
        if (!llmr_sched_plan(&L->sched, &L->step)) {
            fail_all(L, LLMR_OOM_RAM, "out of host memory for the step's plan");
            continue;
        }
        if (L->step.n_items) {
            gpt_step_trace_begin(&L->trace, &L->sched, &L->step);
            run_step(L);
            gpt_step_trace_end(&L->trace);
        }
        else
            nanosleep(&(struct timespec){0, 1000000}, NULL); /* blocks come back as requests end */
    }
}

/* ---- the model's side ------------------------------------------------------------------ */

bool gpt_loop_start(llmr_engine_model *e, uint32_t max_batch, char err[GPT_ERR_MAX])
{
    gpt_loop *L = calloc(1, sizeof *L);
    if (!L || !(L->logits = malloc((size_t)e->m.cfg.vocab * sizeof *L->logits))) {
        snprintf(err, GPT_ERR_MAX, "out of memory for the step loop");
        free(L);
        return false;
    }
    L->e = e;
    llmr_sched_params p = {0};
    p.max_context = e->context;
#ifdef LLMR_GPT_CUDA
    if (loop_on_gpu(L)) { /* the blocks are the GPU's KV cache */
        gpt_cuda_kv_layout kv;
        gpt_cuda_kv(e->gpu, &kv);
        uint32_t running = max_batch ? max_batch : GPT_LOOP_GPU_BATCH;
        p.token_budget = kv.max_tokens;
        p.max_running = running < kv.max_rows ? running : kv.max_rows;
        p.block_tokens = kv.block_tokens;
        p.full_blocks = kv.full_blocks;
        p.window = kv.window;
        p.window_blocks = kv.window_blocks;
    } else
#endif
    {
        uint32_t running = max_batch ? max_batch : GPT_LOOP_DEFAULT_BATCH;
        p.token_budget = LOOP_TOKEN_BUDGET;
        p.max_running = running;
        p.block_tokens = LOOP_BLOCK_TOKENS;
        /* Each request's cache is its own (cpu_forward.h), so the blocks only count: as
         * many as `running` requests of the whole context take, and none is ever
         * preempted. */
        p.full_blocks = (e->context + LOOP_BLOCK_TOKENS - 1) / LOOP_BLOCK_TOKENS * running;
    }
    char serr[LLMR_SCHED_ERR_MAX];
    if (!llmr_sched_init(&L->sched, &p, serr)) {
        snprintf(err, GPT_ERR_MAX, "the step scheduler: %s", serr);
        free(L->logits);
        free(L);
        return false;
    }
    pthread_mutex_init(&L->lock, NULL);
    pthread_cond_init(&L->wake, NULL);
    gpt_step_trace_open(&L->trace, gpt_host());
    if (pthread_create(&L->thread, NULL, loop_main, L) != 0) {
        snprintf(err, GPT_ERR_MAX, "cannot start the step loop's thread");
        llmr_sched_free(&L->sched);
        pthread_mutex_destroy(&L->lock);
        pthread_cond_destroy(&L->wake);
        gpt_step_trace_close(&L->trace);
        free(L->logits);
        free(L);
        return false;
    }
    e->loop = L;
    return true;
}

void gpt_loop_submit(llmr_engine_model *e, request *r)
{
    gpt_loop *L = e->loop;
    pthread_mutex_lock(&L->lock);
    r->queued = NULL;
    if (L->incoming_tail)
        L->incoming_tail->queued = r;
    else
        L->incoming = r;
    L->incoming_tail = r;
    pthread_cond_signal(&L->wake);
    pthread_mutex_unlock(&L->lock);
}

void gpt_loop_wake(llmr_engine_model *e)
{
    gpt_loop *L = e->loop;
    pthread_mutex_lock(&L->lock);
    L->poked = true;
    pthread_cond_signal(&L->wake);
    pthread_mutex_unlock(&L->lock);
}

void gpt_loop_stop(llmr_engine_model *e)
{
    gpt_loop *L = e->loop;
    if (!L)
        return;
    pthread_mutex_lock(&L->lock);
    L->stopping = true;
    pthread_cond_signal(&L->wake);
    pthread_mutex_unlock(&L->lock);
    pthread_join(L->thread, NULL);
    llmr_sched_step_free(&L->step);
    llmr_sched_free(&L->sched);
    pthread_mutex_destroy(&L->lock);
    pthread_cond_destroy(&L->wake);
    free(L->picked);
    free(L->failed);
    free(L->logits);
    gpt_step_trace_close(&L->trace);
#ifdef LLMR_GPT_CUDA
    gpt_gpu_items_free(&L->gpu);
#endif
    free(L);
    e->loop = NULL;
}

bool gpt_loop_is_own_thread(const llmr_engine_model *e)
{
    return e->loop && pthread_equal(pthread_self(), e->loop->thread);
}

uint32_t gpt_loop_max_batch(const llmr_engine_model *e)
{
    return e->loop ? e->loop->sched.p.max_running : 0;
}

uint64_t gpt_loop_kv_capacity(const llmr_engine_model *e)
{
    const llmr_sched_params *p = e->loop ? &e->loop->sched.p : NULL;
    return p ? (uint64_t)(p->full_blocks ? p->full_blocks : p->window_blocks) * p->block_tokens : 0;
}

uint64_t gpt_loop_kv_used(const llmr_engine_model *e)
{
    return e->loop ? atomic_load(&e->loop->kv_used) : 0;
}
