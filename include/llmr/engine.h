/* The llmr engine plugin ABI, version 1.2.
 *
 * An engine is a shared library that llmr loads with dlopen inside an engine worker
 * process (one per loaded model; see docs/engine-abi.md).  It exports one symbol,
 * llmr_engine_negotiate, which hands back a table of function pointers.  Everything
 * else crosses the boundary through that table and through the host services the
 * node passes in.  A plugin links none of llmr's code; it includes this header and
 * llmr/status.h and nothing else of llmr.
 *
 * Versioning.  The table and every struct here start with `struct_size`; tables also
 * carry `abi_major` and `abi_minor`.  A minor version only appends members at the
 * end of structs and adds optional functions, capability bits and log levels; a
 * major version is anything else, and the host refuses a plugin whose major differs
 * (LLMR_ABI_MISMATCH).  Whoever reads a struct written by the other side checks
 * `struct_size` before touching a member newer than 1.0 (LLMR_ENGINE_HAS).
 *
 * Strings are UTF-8 and NUL-terminated.  Memory is never freed across the boundary:
 * what the host passes in stays the host's and is valid only for the duration of
 * the call unless said otherwise; what the engine returns stays the engine's, valid
 * for as long as stated at each function.
 *
 * Status codes are the first ten of llmr/status.h (LLMR_OK .. LLMR_LOAD_FAILED);
 * their numbers never change.  A value outside those ten is treated as
 * LLMR_INTERNAL.  Every failure leaves a sentence in last_error(). */
#ifndef LLMR_ENGINE_H
#define LLMR_ENGINE_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "llmr/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define LLMR_ENGINE_ABI_MAJOR 1
#define LLMR_ENGINE_ABI_MINOR 2

/* The one exported symbol, by name, for dlsym. */
#define LLMR_ENGINE_NEGOTIATE_SYMBOL "llmr_engine_negotiate"

#if defined(_WIN32)
#define LLMR_ENGINE_EXPORT __declspec(dllexport)
#else
#define LLMR_ENGINE_EXPORT __attribute__((visibility("default")))
#endif

/* True when the struct at `ptr` (of type `type`) is large enough to hold `member`:
 * use it before reading a member that a later minor version added. */
#define LLMR_ENGINE_HAS(ptr, type, member) \
    ((ptr)->struct_size >= offsetof(type, member) + sizeof(((type *)0)->member))

/* Opaque handles, defined by the engine.  A model handle lives from a successful
 * load() to unload(). */
typedef struct llmr_engine_model llmr_engine_model;

/* ---- host services ----------------------------------------------------------- */

typedef enum llmr_engine_log_level {
    LLMR_ENGINE_LOG_DEBUG = 0,
    LLMR_ENGINE_LOG_INFO = 1,
    LLMR_ENGINE_LOG_WARN = 2,
    LLMR_ENGINE_LOG_ERROR = 3
} llmr_engine_log_level;

/* What the host offers the engine.  Valid from negotiation until the process ends;
 * every function may be called from any thread. */
typedef struct llmr_host_api {
    uint32_t struct_size;
    uint16_t abi_major;
    uint16_t abi_minor;
    void *ctx; /* pass back as the first argument of every service */
    /* A log line (no newline needed); the host adds time, level and model. */
    void (*log)(void *ctx, int level, const char *message);
    /* RAM that the host accounts to this model.  alloc returns NULL on failure;
     * free takes only what alloc returned (or NULL). */
    void *(*alloc)(void *ctx, size_t size);
    void (*free)(void *ctx, void *ptr);
    /* The clock of token timestamps: CLOCK_MONOTONIC in nanoseconds, the same in
     * every process of the machine. */
    uint64_t (*now_ns)(void *ctx);
} llmr_host_api;

/* ---- what the engine is ----------------------------------------------------- */

enum {
    LLMR_ENGINE_CAP_CPU = 1u << 0,       /* runs on the CPU */
    LLMR_ENGINE_CAP_CUDA = 1u << 1,      /* runs on NVIDIA GPUs */
    LLMR_ENGINE_CAP_LOGPROBS = 1u << 2,  /* fills logprob and top logprobs */
    LLMR_ENGINE_CAP_BATCHING = 1u << 3,  /* runs several requests of a model at once */
    LLMR_ENGINE_CAP_TEXT = 1u << 4,      /* fills token text itself (else the host
                                            decodes ids with the model's tokenizer) */
    LLMR_ENGINE_CAP_CANCEL = 1u << 5     /* cancel() stops a request within a token */
};

typedef struct llmr_engine_info {
    uint32_t struct_size;
    const char *name;    /* "gpt-oss-cuda"; static, the plugin's */
    const char *version; /* "0.1.0"; static */
    uint64_t capabilities;
    uint32_t max_top_logprobs; /* 0 when top logprobs are not offered */
} llmr_engine_info;

/* ---- the model handed to load() ---------------------------------------------- */

/* One tensor of a safetensors model, already checked by the host (dtype, shape and
 * byte range agree) and mapped read-only. */
typedef struct llmr_engine_tensor {
    const char *name;
    const char *dtype; /* safetensors spelling: "BF16", "F32", "U8", ... */
    uint32_t rank;
    uint64_t shape[8];
    const void *data;  /* mapped bytes; valid until unload() returns */
    uint64_t size;     /* bytes */
} llmr_engine_tensor;

/* Everything an engine needs to know about a model, built by the host from the
 * files (never from a private metadata file).  All pointers stay valid until
 * unload() returns (for estimate(): until it returns). */
typedef struct llmr_engine_model_desc {
    uint32_t struct_size;
    const char *name;         /* the registered name, for messages */
    const char *dir;          /* absolute path of the model directory */
    const char *format;       /* "safetensors", "gguf", "directml" */
    const char *runtime;      /* "gpt_oss", "llama_cpp", ... */
    const char *architecture; /* config.json architectures[0], or the GGUF one */
    const char *primary_file; /* relative to dir: the index, single shard, first .gguf */
    const char *config_json;  /* config.json text (safetensors), or NULL */
    const char *checked_config_json; /* the fields the host checked, as a JSON object */
    uint64_t total_bytes;     /* bytes of all weight files */
    size_t file_count;
    const char *const *files; /* names relative to dir */
    const uint64_t *file_sizes;
    size_t tensor_count;      /* safetensors: every tensor, mapped; else 0 */
    const llmr_engine_tensor *tensors; /* read them with llmr_engine_desc_tensor() */
    /* 1.1: bytes from one entry of tensors to the next, so that a later minor version
     * can grow llmr_engine_tensor; 0 (or a 1.0 host's shorter struct): sizeof of 1.0's. */
    size_t tensor_stride;
} llmr_engine_model_desc;

/* Tensor i of d, whatever the host's llmr_engine_tensor size. */
static inline const llmr_engine_tensor *llmr_engine_desc_tensor(const llmr_engine_model_desc *d, size_t i)
{
    size_t stride = sizeof(llmr_engine_tensor);
    if (LLMR_ENGINE_HAS(d, llmr_engine_model_desc, tensor_stride) && d->tensor_stride)
        stride = d->tensor_stride;
    return (const llmr_engine_tensor *)(const void *)((const char *)d->tensors + i * stride);
}

typedef struct llmr_engine_load_params {
    uint32_t struct_size;
    uint32_t context_length; /* tokens per request; 0: the model's default */
    uint32_t max_batch;      /* requests in flight at once; 0: the engine's default */
    int32_t gpu_index;       /* CUDA device ordinal; -1: the CPU */
    uint32_t threads;        /* CPU threads; 0: the engine's default */
    uint64_t vram_budget;    /* bytes this model may take on the GPU; 0: not limited */
    uint64_t ram_budget;     /* bytes of host memory; 0: not limited */
    const char *options_json; /* engine-specific options as a JSON object, or NULL */
} llmr_engine_load_params;

static inline llmr_engine_load_params llmr_engine_load_default_params(void)
{
    llmr_engine_load_params p;
    memset(&p, 0, sizeof p);
    p.struct_size = sizeof p;
    p.gpu_index = -1;
    return p;
}

/* Memory a model needs (estimate) or holds (memory), in bytes.  The host sets
 * struct_size to its own size; the engine writes a 1.2 member only where the host's
 * struct has it (LLMR_ENGINE_HAS), and leaves struct_size as the host set it. */
typedef struct llmr_engine_memory {
    uint32_t struct_size;
    uint64_t vram_bytes;
    uint64_t ram_bytes;
    /* 1.2, memory() only: positions of the KV cache in use by running requests (0: the
     * engine does not say) */
    uint64_t kv_used_tokens;
} llmr_engine_memory;

/* What a loaded model offers; the host sizes its queue and checks prompts by it.
 * struct_size as in llmr_engine_memory. */
typedef struct llmr_engine_model_info {
    uint32_t struct_size;
    uint32_t context_length; /* the effective one: prompt + generated tokens */
    uint32_t max_batch;      /* requests it runs at once; the host queues the rest */
    uint32_t vocab_size;
    /* 1.2: positions the KV cache holds for all requests together (0: the engine does
     * not say, or each request's cache grows on its own) */
    uint64_t kv_capacity_tokens;
} llmr_engine_model_info;

/* ---- requests ----------------------------------------------------------------- */

/* One generation.  The host owns every pointer; they are valid until submit()
 * returns, so the engine copies what it keeps.  Stop strings are the host's job:
 * the engine sees only token ids. */
typedef struct llmr_engine_request_params {
    uint32_t struct_size;
    uint64_t request_id;      /* chosen by the host; unique among the model's requests */
    const int32_t *prompt;
    uint32_t prompt_len;      /* at least 1 */
    uint32_t max_tokens;      /* generated tokens at most; 0: until the context is full */
    float temperature;        /* 0: greedy */
    float top_p;              /* 1: off */
    uint32_t top_k;           /* 0: off */
    float min_p;              /* 0: off */
    float repetition_penalty; /* 1: off */
    float presence_penalty;   /* 0: off */
    float frequency_penalty;  /* 0: off */
    uint64_t seed;
    const int32_t *stop_ids;  /* sampling one of these ends the request (finish STOP) */
    uint32_t stop_id_count;
    uint32_t logprobs;        /* nonzero: fill logprob of each sampled token */
    uint32_t top_logprobs;    /* alternatives per token, at most max_top_logprobs */
} llmr_engine_request_params;

static inline llmr_engine_request_params llmr_engine_request_default_params(void)
{
    llmr_engine_request_params p;
    memset(&p, 0, sizeof p);
    p.struct_size = sizeof p;
    p.temperature = 1.0f;
    p.top_p = 1.0f;
    p.repetition_penalty = 1.0f;
    return p;
}

typedef enum llmr_engine_finish {
    LLMR_ENGINE_FINISH_NONE = 0,      /* more events follow */
    LLMR_ENGINE_FINISH_STOP = 1,      /* a stop id was sampled (it is this event's id) */
    LLMR_ENGINE_FINISH_LENGTH = 2,    /* max_tokens reached or the context is full */
    LLMR_ENGINE_FINISH_CANCELLED = 3, /* cancel() or the callback asked to stop */
    LLMR_ENGINE_FINISH_ERROR = 4      /* status and message say what went wrong */
} llmr_engine_finish;

/* One event of a request: a token as soon as it exists, and the last event
 * (finish != NONE), which may carry a token too (id >= 0) or not (id = -1).
 * Pointers are valid only during the callback. */
typedef struct llmr_engine_token {
    uint32_t struct_size;
    uint64_t request_id;
    uint32_t index;           /* 0 for the first generated token */
    int32_t id;               /* -1: no token in this event */
    const char *text;         /* the token's text if the engine has CAP_TEXT, else NULL */
    uint32_t text_len;
    float logprob;            /* when asked; else 0 */
    uint32_t top_count;
    const int32_t *top_ids;   /* top_count alternatives, most likely first */
    const float *top_logprobs;
    uint64_t time_ns;         /* host->now_ns() when the token was sampled */
    uint32_t finish;          /* llmr_engine_finish */
    int32_t status;           /* with finish ERROR: the llmr_status; else LLMR_OK */
    const char *message;      /* with finish ERROR (and optionally CANCELLED); else NULL */
    uint32_t prompt_tokens;   /* in the last event: prompt tokens processed */
} llmr_engine_token;

/* Called for every event of a request, in order and never concurrently for one
 * request, from any engine thread.  The last event (finish != NONE) comes exactly
 * once for every request that submit() accepted, also when it is cancelled, fails,
 * or the model is unloaded; after it the engine has released the request's KV cache
 * and never mentions the request again.  Return 0 to go on; nonzero asks the
 * engine to stop the request (it then ends it with finish CANCELLED). */
typedef int (*llmr_engine_token_fn)(void *user, const llmr_engine_token *token);

/* ---- the table ---------------------------------------------------------------- */

typedef struct llmr_engine_api {
    uint32_t struct_size;
    uint16_t abi_major;
    uint16_t abi_minor;

    /* Required in 1.0. */

    /* What the engine is.  Callable at any time after negotiation. */
    void (*describe)(llmr_engine_info *out);
    /* Loads a model.  On success *out is the handle; on failure NULL, and
     * last_error(NULL) on the same thread says why (MODEL_CORRUPT names the tensor or
     * field, OOM_VRAM/OOM_RAM give the numbers, UNSUPPORTED says what is missing). */
    llmr_status (*load)(const llmr_engine_model_desc *desc, const llmr_engine_load_params *params,
                        llmr_engine_model **out);
    /* Ends every request still running (each gets its last event, CANCELLED), frees
     * everything the model holds, and invalidates the handle. */
    void (*unload)(llmr_engine_model *model);
    llmr_status (*model_info)(const llmr_engine_model *model, llmr_engine_model_info *out);
    /* Starts a request and returns at once; its events come through on_token.  On
     * failure no event ever comes and last_error(model) says why. */
    llmr_status (*submit)(llmr_engine_model *model, const llmr_engine_request_params *params,
                          llmr_engine_token_fn on_token, void *user);
    /* The detail of the last failure: of a call on `model`, or with NULL of the last
     * load()/estimate() on the calling thread.  Valid until the next call into the
     * plugin on that thread; "" when there was none. */
    const char *(*last_error)(const llmr_engine_model *model);

    /* Optional in 1.0: NULL when the engine does not offer them. */

    /* Memory a load with these params would take, before loading anything.  Without
     * it the host takes the weight bytes as the need. */
    llmr_status (*estimate)(const llmr_engine_model_desc *desc,
                            const llmr_engine_load_params *params, llmr_engine_memory *out);
    /* Asks a request to stop; it ends with finish CANCELLED.  Unknown or finished
     * ids are not an error.  Without it the host stops a request through the
     * callback's return value at its next token. */
    llmr_status (*cancel)(llmr_engine_model *model, uint64_t request_id);
    /* What the model holds now, KV caches of running requests included. */
    llmr_status (*memory)(const llmr_engine_model *model, llmr_engine_memory *out);
    /* The model's logits for the sequence ids[0..n), without sampling: the rows of
     * positions first..n-1 into out, (n - first) x vocab_size floats, the caller's.
     * For correctness checks and scoring; runs beside requests.  first < n. */
    llmr_status (*logits)(llmr_engine_model *model, const int32_t *ids, uint32_t n,
                          uint32_t first, float *out);
} llmr_engine_api;

/* The entry point.  Called once, right after dlopen, before anything else.  The
 * engine checks host->abi_major (returning LLMR_ABI_MISMATCH on a difference), keeps
 * `host`, and sets *out to its table, which stays valid until the process ends. */
typedef llmr_status (*llmr_engine_negotiate_fn)(const llmr_host_api *host,
                                                const llmr_engine_api **out);

LLMR_ENGINE_EXPORT llmr_status llmr_engine_negotiate(const llmr_host_api *host,
                                                     const llmr_engine_api **out);

#ifdef __cplusplus
}
#endif

#endif
