/* gpt-oss: the config.json fields the engine needs, checked, and the tensors they
 * imply (the layout of the Hugging Face checkpoints of openai/gpt-oss-20b/-120b:
 * MXFP4 experts as U8 `_blocks`/`_scales`, everything else BF16). */
#ifndef LLMR_MODELS_GPT_OSS_CONFIG_H
#define LLMR_MODELS_GPT_OSS_CONFIG_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/problems.h"
#include "common/strbuf.h"
#include "models/tensor_spec.h"

#define LLMR_GPT_OSS_MAX_LAYERS 256u
#define LLMR_GPT_OSS_MAX_EOS 8u

typedef enum llmr_gpt_oss_layer_type {
    LLMR_GPT_OSS_SLIDING_ATTENTION,
    LLMR_GPT_OSS_FULL_ATTENTION
} llmr_gpt_oss_layer_type;

typedef struct llmr_gpt_oss_config {
    uint64_t hidden_size;
    uint64_t num_hidden_layers;
    uint64_t num_attention_heads;
    uint64_t num_key_value_heads;
    uint64_t head_dim;
    uint64_t vocab_size;
    uint64_t num_local_experts;
    uint64_t num_experts_per_tok;
    uint64_t intermediate_size;
    uint64_t sliding_window;
    uint64_t max_position_embeddings;
    double rope_theta;
    double rms_norm_eps;
    double swiglu_limit;
    bool attention_bias;
    bool tie_word_embeddings;
    bool has_yarn; /* rope_scaling.rope_type == "yarn" */
    struct {
        double factor;
        double beta_fast;
        double beta_slow;
        uint64_t original_max_position_embeddings;
        bool truncate;
    } yarn;
    uint8_t layer_types[LLMR_GPT_OSS_MAX_LAYERS]; /* llmr_gpt_oss_layer_type */
    uint64_t eos_token_ids[LLMR_GPT_OSS_MAX_EOS];
    uint32_t eos_count;
    int64_t pad_token_id; /* -1 when absent */
} llmr_gpt_oss_config;

/* Reads and checks the config.  Bad fields become problems naming the field
 * (MODEL_CORRUPT).  A well-formed config the engine cannot run (no MXFP4 experts,
 * another RoPE scaling) writes the reason into `unsupported` and returns
 * UNSUPPORTED without adding a problem. */
llmr_status llmr_gpt_oss_config_parse(const json_t *root, const char *file,
                                      llmr_gpt_oss_config *out, llmr_strbuf *unsupported,
                                      llmr_problems *problems);

/* Every tensor the config implies, with dtype and shape. */
void llmr_gpt_oss_expected_tensors(const llmr_gpt_oss_config *c, llmr_tensor_specs *specs);

json_t *llmr_gpt_oss_config_to_json(const llmr_gpt_oss_config *c);

#endif
