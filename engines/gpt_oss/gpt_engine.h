/* What the gpt-oss engine plugin's files share: the loaded model, a request, and the
 * ends of a request.
 *
 *   gpt_oss_engine.c  the engine ABI table: describe, estimate, load, unload, info,
 *                     memory, logits, submit, cancel
 *   step_loop.c       one step loop per model over the step scheduler (engines/sched):
 *                     every running request advances in each step; on the CPU each
 *                     request's chunk runs through its own cache (cpu_forward.h)
 *   gpu_step.c        on the GPU, a step is one forward pass of every request's tokens
 *                     over the paged KV cache (cuda/gpt_cuda.h)
 *   step_trace.c      the step loop's development trace (LLMR_STEP_TRACE)
 *
 * A request belongs to the model's list from submit until it is reaped after its last
 * event (done).  Its fields are written by submit before it is shared, then only by the
 * loop that runs it, except `cancel` (any thread) and `done`/`cache_bytes` (under the
 * model's lock). */
#ifndef GPT_OSS_ENGINE_H
#define GPT_OSS_ENGINE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "cpu_forward.h"
#include "llmr/engine.h"
#include "model.h"
#include "sampler.h"
#include "scheduler.h"
#ifdef LLMR_GPT_CUDA
#include "cuda/gpt_cuda.h"
#endif

#define GPT_ERR_MAX 512
#define GPT_LOOP_DEFAULT_BATCH 16u /* requests the CPU's step loop runs at once by default */
#define GPT_LOOP_GPU_BATCH 256u    /* and the GPU's (the most a step carries) */

typedef struct gpt_loop gpt_loop;

struct llmr_engine_model {
    gpt_model m;
    pthread_mutex_t lock;
    pthread_cond_t changed;  /* a request ended */
    struct request *requests;
    bool unloading;
    uint32_t logits_calls;  /* logits() calls on the GPU in flight: unload waits for them */
    uint32_t context;
    uint64_t weight_bytes;
    bool ignore_eos;
    bool host_sampler; /* every token sampled on the CPU (load option "host_sampler") */
    bool kv_fp8;       /* the GPU's KV cache in fp8 (load option "kv_dtype": "fp8") */
#ifdef LLMR_GPT_CUDA
    gpt_cuda *gpu; /* NULL: the CPU path */
#endif
    gpt_loop *loop; /* the step loop */
    char error[GPT_ERR_MAX];
};

typedef struct request {
    struct request *next;
    llmr_engine_model *model;
    uint64_t id;
    bool internal;        /* a logits() request: cancel() by id never names it */
    int32_t *prompt;
    uint32_t prompt_len, max_tokens;
    int32_t *stop_ids;
    uint32_t stop_count;
    gpt_sampler *sampler;
    llmr_engine_token_fn on_token;
    void *user;
    atomic_bool cancel;
    bool done;
    bool gpu_pick;        /* the GPU path may pick its tokens (no CPU-only option) */
    float temperature;
    uint32_t top_k;       /* gpu_pick: the filters the GPU's pick applies (0, 1, 0: off) */
    float top_p, min_p;
    uint64_t seed;
    bool want_logprob;
    uint32_t top_logprobs; /* gpu_pick: the alternatives wanted */
    float repetition, presence, frequency; /* gpu_pick: the penalties (1, 0, 0: off), whose */
    int32_t *pen_ids;     /* seen tokens (the sampler keeps them) go up in these, */
    uint32_t *pen_counts; /* grown as needed */
    uint32_t pen_cap;
    float *row;           /* the GPU path's row of logits for the CPU sampler (not gpu_pick, or
                             a step whose penalties do not fit: GPT_CUDA_PEN_CAP) */
    float *logits_out;    /* a logits() request (GPU path): rows of positions logits_first.. */
    uint32_t logits_first; /* of the prompt go here, and no token is generated */
    uint64_t cache_bytes; /* its KV cache now (under the model's lock) */
    /* the step loop's: */
    struct request *queued;  /* submitted, not yet in the scheduler */
    llmr_sched_seq *seq;     /* in the scheduler */
    gpt_state cpu;           /* its KV cache on the CPU */
    bool cpu_open;
    gpt_sample last;         /* the last token sampled (events point into it) */
    char error[GPT_ERR_MAX];
} request;

/* The host's services (log, memory, clock), from negotiation. */
const llmr_host_api *gpt_host(void);
/* Whether id ends r: one of its stop ids, or an EOS id of the model (unless the model
 * was loaded with ignore_eos). */
bool gpt_request_is_stop(const request *r, int32_t id);
/* Sends r's last event (ev, with prompt_tokens filled in) and marks r done. */
void gpt_request_end(request *r, llmr_engine_token *ev);
/* Ends r with finish ERROR, status st and message. */
void gpt_request_fail(request *r, llmr_status st, const char *message);

/* ---- step_loop.c ------------------------------------------------------------------ */

/* Starts the model's step loop (a thread) for up to max_batch requests at once (0: the
 * default).  False with err on failure. */
bool gpt_loop_start(llmr_engine_model *e, uint32_t max_batch, char err[GPT_ERR_MAX]);
/* Hands r (in the model's list already) to the loop; its events come from the loop's
 * thread.  Called with the model's lock held (the loop never takes it while holding its
 * own). */
void gpt_loop_submit(llmr_engine_model *e, request *r);
/* Whether the caller is the loop's own thread (an on_token callback). */
bool gpt_loop_is_own_thread(const llmr_engine_model *e);
/* Wakes the loop so that it sees a cancel. */
void gpt_loop_wake(llmr_engine_model *e);
/* Ends every request (CANCELLED) and stops the loop; returns when its thread is gone. */
void gpt_loop_stop(llmr_engine_model *e);
/* Requests the loop runs together at most (model_info's max_batch). */
uint32_t gpt_loop_max_batch(const llmr_engine_model *e);
/* Positions the KV cache holds for all requests together, and those in use after the
 * loop's last step (any thread). */
uint64_t gpt_loop_kv_capacity(const llmr_engine_model *e);
uint64_t gpt_loop_kv_used(const llmr_engine_model *e);

#ifdef LLMR_GPT_CUDA
/* ---- gpu_step.c ------------------------------------------------------------------- */

/* The items of one GPU step (reused from step to step). */
typedef struct gpt_gpu_items {
    gpt_cuda_item *items;
    uint32_t cap;
} gpt_gpu_items;

/* Runs the step's items on the GPU in one forward pass; picked[i] gets item i's token
 * where it samples (its request's `last` is set), -1 elsewhere.  LLMR_OK, or the status
 * with which every request of the step fails (err says why). */
llmr_status gpt_gpu_step_run(llmr_engine_model *e, gpt_gpu_items *buf, const llmr_sched_step *step,
                             int32_t *picked, char err[GPT_ERR_MAX]);
void gpt_gpu_items_free(gpt_gpu_items *buf);
#endif

#endif
