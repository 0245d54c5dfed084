/* The llama.cpp engine plugin (runtime llama_cpp, format gguf): what its files share.
 *
 *   llama_cpp_engine.c  the ABI table: negotiate, describe, load, unload, model_info,
 *                       memory, estimate, last_error
 *   lc_requests.c       submit, cancel and the run of one request on its own context
 *   lc_logits.c         logits of a sequence, without sampling
 *   lc_sampling.c       request params -> llama.cpp sampler chain; logprobs
 *   lc_text.c           token pieces -> complete UTF-8
 *   lc_estimate.c       memory a load will take, from the GGUF's metadata
 *   lc_log.c            llama.cpp's log -> the host's log; the reason of a failure
 *   lc_backends.c       the release check of llama.cpp's libraries, ggml's backends
 *   lc_gpu_code.c       which GPUs the CUDA backend's code runs on
 *
 * One model handle owns a llama_model and a pool of llama_contexts.  Each running
 * request has a context of its own (its own KV cache), taken from the pool or created
 * when fewer than max_batch exist, cleared and given back when the request ends.
 * Each request runs on a thread of its own. */
#ifndef LLMR_LC_ENGINE_H
#define LLMR_LC_ENGINE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "llama.h"
#include "llmr/engine.h"

#define LC_ERROR_MAX 1024
#define LC_MAX_TOP_LOGPROBS 20
/* The context of a request when neither the host nor the options say: the model's
 * training context, at most this (each context holds its KV cache in full). */
#define LC_DEFAULT_CONTEXT 8192u

typedef struct lc_request lc_request;

struct llmr_engine_model {
    struct llama_model *model;
    const struct llama_vocab *vocab;
    int32_t vocab_size;
    uint32_t context;   /* tokens per request */
    uint32_t max_batch; /* contexts at most, so requests at once */
    uint32_t threads;
    int gpu;            /* CUDA ordinal the weights are on, or -1 */
    bool ignore_eos;    /* option: end-of-generation tokens do not stop a request */
    char name[128];

    pthread_mutex_t lock;
    pthread_cond_t changed;            /* a context came back, a request ended */
    struct llama_context **idle;       /* contexts free for a request */
    uint32_t idle_count, context_count; /* idle ones; all that exist */
    lc_request *running;               /* requests submitted and not yet ended */
    uint32_t in_flight;
    atomic_bool unloading;

    uint64_t weight_bytes;  /* llama_model_size */
    uint64_t context_bytes; /* one context: KV cache and compute buffers (estimated) */
    uint64_t vram_measured; /* device memory the load took (0: not measured) */
};

/* ---- lc_log.c ------------------------------------------------------------------- */

/* Sets where llama.cpp's log lines go (once, at negotiation). */
void lc_log_init(const llmr_host_api *host);
void lc_log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The calling thread's last failure, the sentence last_error() returns. */
void lc_set_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
const char *lc_error(void);
/* The first error line llama.cpp logged on this thread since the last clear ("" when
 * none), and the clear (before a call whose failure it should explain). */
const char *lc_llama_error(void);
void lc_llama_error_clear(void);
uint64_t lc_now_ns(void);

/* ---- lc_backends.c --------------------------------------------------------------- */

/* Once per process: checks the llama.cpp libraries beside the plugin are the release
 * it was built against and loads ggml's backends from there.  Then, for a load on CUDA
 * ordinal `gpu` (-1: none), that the CUDA backend loaded and that its GPU code runs on
 * that GPU (lc_gpu_code.h).  LLMR_OK, or the status with lc_set_error: the libraries are
 * of another release, no backend loads, the CUDA backend did not load or cannot run on
 * that GPU (UNSUPPORTED, with the reason and what to do). */
llmr_status lc_backends_ready(int gpu);
/* Whether a library's ggml version and commit are the wanted ones; if not, why (a
 * sentence that names both and what to do) into why. */
bool lc_release_matches(const char *have_version, const char *have_commit, const char *want_version,
                        const char *want_commit, char *why, size_t why_size);

/* ---- lc_estimate.c --------------------------------------------------------------- */

typedef struct lc_gguf_shape {
    char architecture[64];
    uint32_t n_layer, n_embd, n_head, n_head_kv, key_length, value_length;
    uint32_t context_train, vocab_size, sliding_window;
} lc_gguf_shape;

/* Reads the shape from the GGUF at path (metadata only).  LLMR_MODEL_CORRUPT with
 * lc_set_error when the file is not a GGUF llama.cpp can read. */
llmr_status lc_read_shape(const char *path, lc_gguf_shape *out);
/* Bytes one context of n_ctx tokens takes (KV cache at f16 plus compute buffers). */
uint64_t lc_context_bytes(const lc_gguf_shape *s, uint32_t n_ctx, uint32_t n_batch);
/* The context a load gives each request. */
uint32_t lc_context_of(const lc_gguf_shape *s, const llmr_engine_load_params *p);
uint32_t lc_max_batch_of(const llmr_engine_load_params *p, bool gpu);

/* ---- lc_requests.c ---------------------------------------------------------------- */

llmr_status lc_submit(llmr_engine_model *m, const llmr_engine_request_params *p,
                      llmr_engine_token_fn on_token, void *user);
llmr_status lc_cancel(llmr_engine_model *m, uint64_t request_id);
/* Asks every running request to stop and waits until all have ended. */
void lc_stop_all(llmr_engine_model *m);
/* Frees the pool's contexts (no request running). */
void lc_free_contexts(llmr_engine_model *m);
/* Context params for m: n_ctx tokens, batches of n_batch (micro-batches of at most
 * 512), one sequence, m's threads. */
struct llama_context_params lc_context_params(const llmr_engine_model *m, uint32_t n_ctx,
                                              uint32_t n_batch);
/* A new context for m (NULL with lc_set_error on failure). */
struct llama_context *lc_new_context(llmr_engine_model *m);

/* ---- lc_logits.c ------------------------------------------------------------------ */

/* The ABI's logits(): rows first..n-1 of the sequence ids[0..n) into out. */
llmr_status lc_logits(llmr_engine_model *m, const int32_t *ids, uint32_t n, uint32_t first,
                      float *out);

/* ---- lc_sampling.c ---------------------------------------------------------------- */

/* The sampler chain for a request (NULL with lc_set_error when a parameter is out of
 * range).  Prompt tokens are fed to the penalties. */
struct llama_sampler *lc_sampler_new(const llmr_engine_request_params *p, int32_t vocab_size,
                                     uint32_t context);
/* From raw logits: the log-probability of id, and the top `want` alternatives. */
void lc_logprobs(const float *logits, int32_t vocab_size, int32_t id, uint32_t want,
                 float *logprob, int32_t *top_ids, float *top_logprobs, uint32_t *top_count);

/* ---- lc_text.c -------------------------------------------------------------------- */

/* Bytes of pieces not yet given out because they end inside a UTF-8 character. */
typedef struct lc_text {
    char held[8];
    uint32_t held_len;
} lc_text;

/* Appends the piece of `token` to what is held and writes to out (cap bytes) the
 * longest prefix that is complete UTF-8; the rest stays held.  Returns bytes written. */
uint32_t lc_text_push(lc_text *t, const struct llama_vocab *vocab, int32_t token, char *out,
                      uint32_t cap);
/* What is still held at the end, each broken sequence as U+FFFD. */
uint32_t lc_text_finish(lc_text *t, char *out, uint32_t cap);

#endif
