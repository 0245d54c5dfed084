/* The gpt-oss CUDA path, as the engine (plain C) sees it.
 *
 * gpt_cuda is the model on one GPU: the weights uploaded once from the bound model
 * (model.h: the mapped safetensors; bf16 matrices, MXFP4 experts kept as MXFP4, the
 * small vectors as fp32), the RoPE/YaRN table, the scratch of one step, and the paged KV
 * cache: two pools of blocks of GPT_CUDA_BLOCK_TOKENS positions (one for the layers that
 * attend to every position, one for the sliding-window layers), fp16, sized at load.
 *
 * The engine's step loop owns the blocks (the step scheduler, engines/sched, hands them
 * out) and calls gpt_cuda_step once per step with the step's items: each item is a run of
 * one sequence's tokens at its positions, with its block tables; all of them go through
 * the model in one forward pass (one token of each decoding sequence and chunks of
 * prompts together), and the items that ask for it get their next token picked on the
 * GPU, or rows of logits copied to the host.  A step of one decoding sequence runs as a
 * CUDA graph (matrix-vector kernels, captured at its first use).  One thread calls at a
 * time (the step loop's).  err arguments are 512 bytes. */
#ifndef GPT_OSS_CUDA_H
#define GPT_OSS_CUDA_H

#include <stdbool.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#include "../model.h"
#include "llmr/engine.h"

#define GPT_CUDA_BLOCK_TOKENS 16u /* positions in one KV block */
#define GPT_CUDA_MAX_ROWS 256u    /* sequences one step carries at most */

typedef struct gpt_cuda gpt_cuda;

/* Called as the weights go up: bytes done of total. */
typedef void (*gpt_cuda_progress_fn)(void *user, uint64_t done, uint64_t total);

typedef struct gpt_cuda_params {
    int device;              /* CUDA ordinal */
    uint32_t context;        /* positions per sequence wanted */
    uint32_t sequences;      /* sequences of full context the KV cache should hold (0: 4) */
    uint64_t kv_pool_bytes;  /* 0: from `sequences`, within free VRAM */
    uint64_t vram_budget;    /* 0: not limited */
    bool batch_invariant;    /* every row's sums in one order whatever the step holds */
    bool kv_fp8;             /* the KV cache in fp8 e4m3 with row scales (else fp16) */
    bool own_gemm;           /* the dense products on the engine's kernels even where
                                cuBLAS is there (the load option "cublas": 0) */
    gpt_cuda_progress_fn progress;
    void *user;
} gpt_cuda_params;

/* NULL (with err) when no usable GPU or memory: OOM_VRAM, UNSUPPORTED (no GPU, a
 * shape the kernels do not take), INTERNAL (a CUDA error). */
llmr_status gpt_cuda_load(const gpt_model *m, const gpt_cuda_params *p, gpt_cuda **out,
                          char *err);
void gpt_cuda_free(gpt_cuda *g);

/* VRAM this model holds: weights, tables, scratch and the KV cache. */
uint64_t gpt_cuda_vram_bytes(const gpt_cuda *g);
/* Positions per sequence (at most what was asked; less when the cache holds fewer). */
uint32_t gpt_cuda_context(const gpt_cuda *g);
/* VRAM the model needs for one sequence of `context` positions (before loading). */
uint64_t gpt_cuda_estimate(const gpt_config *c, uint64_t weight_bytes, uint32_t context);
/* The GPU's name, for logs ("" before load). */
const char *gpt_cuda_device_name(const gpt_cuda *g);
/* What runs the dense products of steps of several tokens: "cuBLAS", or the engine's
 * own kernels and why. */
const char *gpt_cuda_dense_products(const gpt_cuda *g);

/* The KV cache's shape, for the step scheduler. */
typedef struct gpt_cuda_kv_layout {
    uint32_t block_tokens;  /* positions in a block */
    uint32_t full_blocks;   /* blocks of the full-attention layers' pool */
    uint32_t window;        /* positions a sliding layer attends to; 0: no sliding pool */
    uint32_t window_blocks; /* blocks of the sliding layers' pool */
    uint32_t max_tokens;    /* tokens one step carries at most */
    uint32_t max_rows;      /* items one step carries at most */
    uint64_t bytes_per_token; /* KV bytes of one position (both pools) */
    bool fp8;               /* fp8 e4m3 with row scales (else fp16) */
} gpt_cuda_kv_layout;
void gpt_cuda_kv(const gpt_cuda *g, gpt_cuda_kv_layout *out);

#define GPT_CUDA_PEN_CAP (1u << 20) /* penalty entries (seen tokens) one step carries */
#define GPT_CUDA_TOP_MAX 20u         /* top_logprobs a pick row may ask for */

/* One item of a step: tokens[0..count) of a sequence at positions start.. */
typedef struct gpt_cuda_item {
    const int32_t *tokens;
    uint32_t start, count;
    const uint32_t *full;    /* block tables, as the scheduler keeps them: the block of */
    uint32_t n_full;         /* positions [i*B, (i+1)*B) is full[i] (ring[i] on sliding */
    const uint32_t *ring;    /* layers; entries the window has passed may be gone) */
    uint32_t n_ring;
    bool pick;               /* pick the next token from the last row, on the GPU */
    float temperature;       /* greedy below 1e-5 (the CPU sampler's threshold), else an */
    uint64_t seed;           /* exact draw from softmax(logits / temperature) by the */
    uint64_t draw;           /* Gumbel-max trick keyed by (seed, draw), over the tokens */
    uint32_t top_k;          /* that top_k, top_p and min_p keep, as the CPU sampler */
    float top_p, min_p;      /* filters (0, 1 and 0: off) */
    const int32_t *pen_ids;  /* with pick, the tokens the request has seen (n_pen of them, */
    const uint32_t *pen_counts; /* each once) and how often it generated each: the */
    uint32_t n_pen;          /* penalties below apply to them before the filters (n_pen */
    float repetition;        /* 0: none; at most GPT_CUDA_PEN_CAP in a step); repetition 1, */
    float presence, frequency; /* presence and frequency 0: off (sampler.h) */
    uint32_t top_logprobs;   /* with pick: the alternatives wanted (0..GPT_CUDA_TOP_MAX); */
    uint32_t top_count;      /* out: how many there are (finite ones), most likely first, */
    int32_t top_ids[GPT_CUDA_TOP_MAX];  /* ties to the lower id, with their log-softmax at */
    float top_logprobs_out[GPT_CUDA_TOP_MAX]; /* temperature 1 (as the CPU sampler's) */
    float *logits;           /* host or NULL: rows logits_from..count-1 of the item go to */
    uint32_t logits_from;    /* logits + (row - logits_from) * vocab */
    int32_t picked;          /* out, with pick: the id, and its log-softmax at */
    float logprob;           /* temperature 1 */
} gpt_cuda_item;

/* Runs the items through the model in one forward pass (every item's keys and values
 * land in the cache at its positions).  UNSUPPORTED for more tokens or items than
 * gpt_cuda_kv allows or an id outside the vocabulary, INTERNAL for a block table that
 * lacks a position or a CUDA error. */
llmr_status gpt_cuda_step(gpt_cuda *g, gpt_cuda_item *items, uint32_t n, char *err);

#ifdef __cplusplus
}
#endif

#endif
