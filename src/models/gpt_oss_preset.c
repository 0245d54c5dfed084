/* gpt-oss presets: see gpt_oss_preset.h.  Values of gpt-oss-20b and gpt-oss-120b as
 * published in their config.json (120b: 36 layers and 128 experts, every width and every
 * other field as 20b's); the -2l presets are those models with their first two layers
 * (one sliding, one full), every width the same; the tiny preset keeps every field and
 * the real vocabulary (so the real tokenizer works with it) and shrinks the widths. */
#include "models/gpt_oss_preset.h"

#include <string.h>

const char *const llmr_gpt_oss_preset_names[] = {"gpt-oss-20b",  "gpt-oss-20b-2l", "gpt-oss-120b",
                                                 "gpt-oss-120b-2l", "gpt-oss-tiny", NULL};

typedef struct preset {
    const char *name;
    int hidden, layers, heads, kv_heads, head_dim, experts, top_k, intermediate;
} preset;

static const preset presets[] = {
    {"gpt-oss-20b", 2880, 24, 64, 8, 64, 32, 4, 2880},
    {"gpt-oss-20b-2l", 2880, 2, 64, 8, 64, 32, 4, 2880},
    {"gpt-oss-120b", 2880, 36, 64, 8, 64, 128, 4, 2880},
    {"gpt-oss-120b-2l", 2880, 2, 64, 8, 64, 128, 4, 2880},
    {"gpt-oss-tiny", 64, 2, 4, 2, 16, 4, 2, 64},
};

json_t *llmr_gpt_oss_preset_config(const char *name)
{
    const preset *p = NULL;
    for (size_t i = 0; i < sizeof presets / sizeof presets[0]; i++)
        if (strcmp(presets[i].name, name) == 0)
            p = &presets[i];
    if (!p)
        return NULL;
    json_t *types = json_array();
    for (int i = 0; i < p->layers; i++)
        json_array_append_new(types, json_string(i % 2 ? "full_attention" : "sliding_attention"));
    return json_pack(
        "{s:[s], s:b, s:f, s:i, s:i, s:i, s:s, s:i, s:i, s:f, s:i, s:o, s:i, s:s, s:i, s:i, "
        "s:i, s:i, s:i, s:b, s:i, s:{s:[s,s,s,s], s:s}, s:f, s:{s:f, s:f, s:f, s:i, s:s, s:b}, "
        "s:i, s:f, s:i, s:f, s:b, s:s, s:b, s:i}",
        "architectures", "GptOssForCausalLM",
        "attention_bias", 1,
        "attention_dropout", 0.0,
        "eos_token_id", 200002,
        "experts_per_token", p->top_k,
        "head_dim", p->head_dim,
        "hidden_act", "silu",
        "hidden_size", p->hidden,
        "initial_context_length", 4096,
        "initializer_range", 0.02,
        "intermediate_size", p->intermediate,
        "layer_types", types,
        "max_position_embeddings", 131072,
        "model_type", "gpt_oss",
        "num_attention_heads", p->heads,
        "num_experts_per_tok", p->top_k,
        "num_hidden_layers", p->layers,
        "num_key_value_heads", p->kv_heads,
        "num_local_experts", p->experts,
        "output_router_logits", 0,
        "pad_token_id", 199999,
        "quantization_config",
            "modules_to_not_convert", "model.layers.*.self_attn", "model.layers.*.mlp.router",
                "model.embed_tokens", "lm_head",
            "quant_method", "mxfp4",
        "rms_norm_eps", 1e-05,
        "rope_scaling", "beta_fast", 32.0, "beta_slow", 1.0, "factor", 32.0,
            "original_max_position_embeddings", 4096, "rope_type", "yarn", "truncate", 0,
        "rope_theta", 150000,
        "router_aux_loss_coef", 0.9,
        "sliding_window", 128,
        "swiglu_limit", 7.0,
        "tie_word_embeddings", 0,
        "transformers_version", "4.55.0.dev0",
        "use_cache", 1,
        "vocab_size", 201088);
}

json_t *llmr_gpt_oss_generation_config(void)
{
    return json_pack("{s:i, s:b, s:[i,i,i], s:i, s:s}", "bos_token_id", 199998, "do_sample", 1,
                     "eos_token_id", 200002, 199999, 200012, "pad_token_id", 199999,
                     "transformers_version", "4.55.0.dev0");
}
