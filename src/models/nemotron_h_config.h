/* Nemotron-H (model_type "nemotron_h", e.g. NVIDIA Nemotron 3 Nano 30B-A3B): the
 * config.json fields, checked, and the tensors they imply.
 *
 * A Nemotron-H stack mixes four kinds of layer, given either as
 * `hybrid_override_pattern` ("MEM*E...": M Mamba-2, E mixture of experts, * attention,
 * - dense MLP) or as `layers_block_type` (["mamba"|"linear_attention", "moe",
 * "attention"|"full_attention", "mlp"]).  Only the fields of the kinds present are
 * required.  llmr loads and validates these models; it does not generate text with
 * them yet. */
#ifndef LLMR_MODELS_NEMOTRON_H_CONFIG_H
#define LLMR_MODELS_NEMOTRON_H_CONFIG_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/problems.h"
#include "common/strbuf.h"
#include "models/tensor_spec.h"

#define LLMR_NEMOTRON_H_MAX_LAYERS 512u

typedef enum llmr_nemotron_h_layer {
    LLMR_NEMOTRON_H_MAMBA = 'M',
    LLMR_NEMOTRON_H_MOE = 'E',
    LLMR_NEMOTRON_H_ATTENTION = '*',
    LLMR_NEMOTRON_H_MLP = '-'
} llmr_nemotron_h_layer;

typedef struct llmr_nemotron_h_config {
    uint64_t hidden_size;
    uint64_t vocab_size;
    uint64_t num_hidden_layers;
    char layers[LLMR_NEMOTRON_H_MAX_LAYERS + 1]; /* pattern letters, NUL-terminated */
    /* Mamba-2 */
    uint64_t mamba_num_heads, mamba_head_dim, n_groups, ssm_state_size, conv_kernel;
    bool use_conv_bias, mamba_proj_bias;
    /* attention */
    uint64_t num_attention_heads, num_key_value_heads, head_dim;
    bool attention_bias;
    /* dense MLP */
    uint64_t intermediate_size;
    bool mlp_bias;
    /* mixture of experts */
    uint64_t n_routed_experts, num_experts_per_tok, moe_intermediate_size;
    uint64_t n_shared_experts, moe_shared_expert_intermediate_size;
    double routed_scaling_factor;
    double norm_eps;
    uint64_t max_position_embeddings;
    bool tie_word_embeddings;
} llmr_nemotron_h_config;

/* As llmr_gpt_oss_config_parse: bad fields are problems, a valid config that llmr
 * cannot load (quantized checkpoints, latent MoE) goes to `unsupported`. */
llmr_status llmr_nemotron_h_config_parse(const json_t *root, const char *file,
                                         llmr_nemotron_h_config *out, llmr_strbuf *unsupported,
                                         llmr_problems *problems);

void llmr_nemotron_h_expected_tensors(const llmr_nemotron_h_config *c, llmr_tensor_specs *specs);

json_t *llmr_nemotron_h_config_to_json(const llmr_nemotron_h_config *c);

#endif
