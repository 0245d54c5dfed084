/* A gpt-oss model as the engine holds it: the config (from the fields the host
 * checked), the weights bound in place to the mapped tensors of the descriptor (no
 * copy of expert weights), the small vectors (norms, biases, sinks) decoded to fp32,
 * the RoPE/YaRN table, and the ids that end a generation (generation_config.json's EOS
 * ids, and <|return|> and <|call|>). */
#ifndef GPT_OSS_MODEL_H
#define GPT_OSS_MODEL_H

#include <stdbool.h>
#include <stdint.h>

#include "cpu_kernels.h"
#include "llmr/engine.h"

/* generation_config.json's first 8 EOS ids, and room for <|return|> and <|call|> */
#define GPT_MAX_EOS 10

typedef struct gpt_config {
    uint32_t hidden, layers, heads, kv_heads, head_dim, vocab;
    uint32_t experts, top_k, inter, window, max_position;
    double theta, eps, swiglu_limit;
    bool has_yarn;
    gpt_yarn yarn;
    bool sliding[256];         /* per layer */
    int32_t eos[GPT_MAX_EOS];  /* generation ends on these ids */
    uint32_t n_eos;
} gpt_config;

typedef struct gpt_layer {
    float *attn_norm, *mlp_norm;          /* hidden */
    gpt_matrix q, k, v, o;
    float *q_bias, *k_bias, *v_bias, *o_bias;
    float *sinks;                          /* heads */
    gpt_matrix router;
    float *router_bias;                    /* experts */
    gpt_mxfp4 *gate_up;                    /* experts of [2*inter][hidden] */
    gpt_mxfp4 *down;                       /* experts of [hidden][inter] */
    float *gate_up_bias;                   /* experts x 2*inter */
    float *down_bias;                      /* experts x hidden */
} gpt_layer;

typedef struct gpt_model {
    gpt_config cfg;
    gpt_matrix embed, lm_head;
    float *final_norm;
    gpt_layer *layers;
    gpt_rope rope;
    gpt_pool *pool;
} gpt_model;

/* Binds the descriptor's tensors and config.  On failure the model needs no freeing
 * and err (512 bytes) says which tensor or field: MODEL_CORRUPT, UNSUPPORTED, OOM_RAM. */
llmr_status gpt_model_bind(gpt_model *m, const llmr_engine_model_desc *desc, unsigned threads,
                           char *err);
void gpt_model_free(gpt_model *m);

/* Host memory the CPU path needs beyond the mapped weights, for `batch` requests of
 * `context` tokens (KV caches and scratch). */
uint64_t gpt_model_ram_estimate(const gpt_config *c, uint32_t context, uint32_t batch);

/* Reads the config fields the host checked (desc->checked_config_json) and the EOS
 * ids of generation_config.json in dir (absent: config's eos ids).  err: 512 bytes. */
llmr_status gpt_config_read(gpt_config *c, const llmr_engine_model_desc *desc, char *err);

#endif
