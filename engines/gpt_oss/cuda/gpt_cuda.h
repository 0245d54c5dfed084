/* The gpt-oss CUDA path, as the engine (plain C) sees it.
 *
 * gpt_cuda is the model on one GPU: the weights uploaded once from the bound model
 * (model.h: the mapped safetensors; bf16 matrices, MXFP4 experts kept as MXFP4, the
 * small vectors as fp32), the RoPE/YaRN table, the scratch of one prefill chunk and
 * of the decode step, and a KV pool sized at load from free VRAM.  A gpt_cuda_seq is
 * one request's slice of that pool (full layers keep every position, sliding layers a
 * ring of the window) and its decode state.
 *
 * The decode step (embedding to the picked token) is one CUDA graph per model,
 * captured on first use: it reads the active sequence's state from device memory, so
 * sequences take turns by swapping that state (two small copies), not by capturing
 * again.  All calls on one gpt_cuda take a lock: sequences interleave step by step.
 * err arguments are 512 bytes. */
#ifndef GPT_OSS_CUDA_H
#define GPT_OSS_CUDA_H

#include <stdbool.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#include "../model.h"
#include "llmr/engine.h"

typedef struct gpt_cuda gpt_cuda;
typedef struct gpt_cuda_seq gpt_cuda_seq;

/* Called as the weights go up: bytes done of total. */
typedef void (*gpt_cuda_progress_fn)(void *user, uint64_t done, uint64_t total);

typedef struct gpt_cuda_params {
    int device;              /* CUDA ordinal */
    uint32_t context;        /* positions per sequence wanted */
    uint32_t sequences;      /* sequences of full context the KV pool should hold (0: 4) */
    uint64_t kv_pool_bytes;  /* 0: from free VRAM (what `sequences` need, or what is free) */
    uint64_t vram_budget;    /* 0: not limited */
    gpt_cuda_progress_fn progress;
    void *user;
} gpt_cuda_params;

/* NULL (with err) when no usable GPU or memory: OOM_VRAM, UNSUPPORTED (no GPU, a
 * shape the kernels do not take), INTERNAL (a CUDA error). */
llmr_status gpt_cuda_load(const gpt_model *m, const gpt_cuda_params *p, gpt_cuda **out,
                          char *err);
void gpt_cuda_free(gpt_cuda *g);

/* VRAM this model holds: weights, tables, scratch and the KV pool. */
uint64_t gpt_cuda_vram_bytes(const gpt_cuda *g);
/* Positions per sequence (at most what was asked; less when the pool is smaller). */
uint32_t gpt_cuda_context(const gpt_cuda *g);
/* Sequences of full context the pool holds. */
uint32_t gpt_cuda_sequences(const gpt_cuda *g);
/* VRAM the model needs for one sequence of `context` positions (before loading). */
uint64_t gpt_cuda_estimate(const gpt_config *c, uint64_t weight_bytes, uint32_t context);
/* The GPU's name, for logs ("" before load). */
const char *gpt_cuda_device_name(const gpt_cuda *g);

/* A sequence for up to max_tokens positions.  OOM_VRAM when the pool has no room. */
llmr_status gpt_cuda_seq_open(gpt_cuda *g, uint32_t max_tokens, gpt_cuda_seq **out, char *err);
void gpt_cuda_seq_close(gpt_cuda_seq *s);
uint64_t gpt_cuda_seq_bytes(const gpt_cuda_seq *s);
uint32_t gpt_cuda_seq_pos(const gpt_cuda_seq *s);

/* How the GPU picks the next token: greedy when temperature < 1e-5 (the CPU sampler's
 * threshold), else an exact draw from softmax(logits / temperature) by the Gumbel-max
 * trick, keyed by (seed, step): the same seed gives the same tokens on this path.  The
 * logprob that comes back is the log-softmax at temperature 1. */
typedef struct gpt_cuda_sampling {
    float temperature;
    uint64_t seed;
} gpt_cuda_sampling;

/* Runs ids[0..n) at the sequence's next positions (in chunks).  logits (host, may be
 * NULL) receives the rows of the last n_logits of them.  With pick, the next token is
 * picked on the GPU from the last row (id, logprob may be NULL) and becomes the token
 * the next gpt_cuda_decode runs.  UNSUPPORTED past the sequence's positions or for an
 * id outside the vocabulary. */
llmr_status gpt_cuda_prefill(gpt_cuda_seq *s, const int32_t *ids, uint32_t n, float *logits,
                             uint32_t n_logits, const gpt_cuda_sampling *pick, int32_t *id,
                             float *logprob, char *err);
/* One decode step through the graph: runs `token` (or, when token < 0, the last
 * picked id) and picks the next with the sampling of the last prefill; id/logprob as
 * there.  logits (host, may be NULL) receives the step's row. */
llmr_status gpt_cuda_decode(gpt_cuda_seq *s, int32_t token, float *logits, int32_t *id,
                            float *logprob, char *err);

#ifdef __cplusplus
}
#endif

#endif
