/* Nemotron-H config and tensor layout: see nemotron_h_config.h.  The tensor names and
 * shapes follow the checkpoints transformers writes for NemotronHForCausalLM
 * (backbone.*, one tensor per routed expert). */
#include "models/nemotron_h_config.h"

#include <string.h>

#include "common/json_util.h"
#include "models/config_reader.h"

static char kind_from_word(const char *w)
{
    if (strcmp(w, "mamba") == 0 || strcmp(w, "linear_attention") == 0 || strcmp(w, "M") == 0)
        return LLMR_NEMOTRON_H_MAMBA;
    if (strcmp(w, "moe") == 0 || strcmp(w, "E") == 0)
        return LLMR_NEMOTRON_H_MOE;
    if (strcmp(w, "attention") == 0 || strcmp(w, "full_attention") == 0 || strcmp(w, "*") == 0)
        return LLMR_NEMOTRON_H_ATTENTION;
    if (strcmp(w, "mlp") == 0 || strcmp(w, "-") == 0)
        return LLMR_NEMOTRON_H_MLP;
    return 0;
}

/* Fills c->layers from hybrid_override_pattern and/or layers_block_type. */
static void read_layers(llmr_config_reader *r, llmr_nemotron_h_config *c)
{
    char from_list[LLMR_NEMOTRON_H_MAX_LAYERS + 1] = "";
    const char *pattern = llmr_config_string(r, "hybrid_override_pattern", false);
    const json_t *list = json_object_get(r->root, "layers_block_type");
    if (pattern) {
        size_t n = strlen(pattern);
        if (n == 0 || n > LLMR_NEMOTRON_H_MAX_LAYERS) {
            llmr_config_fail(r, LLMR_MODEL_CORRUPT, "hybrid_override_pattern",
                             "must hold 1 to %u layers", LLMR_NEMOTRON_H_MAX_LAYERS);
            return;
        }
        for (size_t i = 0; i < n; i++) {
            if (!strchr("ME*-", pattern[i])) {
                llmr_config_fail(r, LLMR_MODEL_CORRUPT, "hybrid_override_pattern",
                                 "[%zu] is '%c'; layers are M (Mamba), E (MoE), * (attention) "
                                 "or - (MLP)",
                                 i, (pattern[i] >= 0x20 && pattern[i] < 0x7f) ? pattern[i] : '?');
                return;
            }
        }
        memcpy(c->layers, pattern, n + 1);
    }
    if (list && !json_is_null(list)) {
        if (!json_is_array(list) || json_array_size(list) == 0 ||
            json_array_size(list) > LLMR_NEMOTRON_H_MAX_LAYERS) {
            llmr_config_fail(r, LLMR_MODEL_CORRUPT, "layers_block_type",
                             "must be an array of 1 to %u layer kinds", LLMR_NEMOTRON_H_MAX_LAYERS);
            return;
        }
        size_t i;
        const json_t *v;
        json_array_foreach(list, i, v) {
            char k = json_is_string(v) ? kind_from_word(json_string_value(v)) : 0;
            if (!k) {
                llmr_strbuf got = LLMR_STRBUF_INIT;
                llmr_json_describe(&got, v);
                llmr_config_fail(r, LLMR_MODEL_CORRUPT, "layers_block_type",
                                 "[%zu] is %s; kinds are mamba, moe, attention, mlp", i,
                                 llmr_strbuf_cstr(&got));
                llmr_strbuf_free(&got);
                return;
            }
            from_list[i] = k;
        }
        from_list[json_array_size(list)] = '\0';
        if (pattern && strcmp(pattern, from_list) != 0) {
            llmr_config_fail(r, LLMR_MODEL_CORRUPT, "layers_block_type",
                             "and hybrid_override_pattern describe different layers");
            return;
        }
        memcpy(c->layers, from_list, sizeof from_list);
    }
    if (!c->layers[0]) {
        llmr_config_fail(r, LLMR_MODEL_CORRUPT, "hybrid_override_pattern",
                         "is missing, and so is layers_block_type (nemotron_h needs one)");
        return;
    }
    uint64_t n = strlen(c->layers);
    if (llmr_config_u64(r, "num_hidden_layers", 1, LLMR_NEMOTRON_H_MAX_LAYERS, false, n,
                        &c->num_hidden_layers) &&
        c->num_hidden_layers != n)
        llmr_config_fail(r, LLMR_MODEL_CORRUPT, "num_hidden_layers",
                         "is %llu but the layer pattern has %llu layers",
                         (unsigned long long)c->num_hidden_layers, (unsigned long long)n);
}

static void read_mamba(llmr_config_reader *r, llmr_nemotron_h_config *c)
{
    llmr_config_u64(r, "mamba_num_heads", 1, 4096, true, 0, &c->mamba_num_heads);
    llmr_config_u64(r, "mamba_head_dim", 1, 4096, true, 0, &c->mamba_head_dim);
    llmr_config_u64(r, "n_groups", 1, 4096, true, 0, &c->n_groups);
    llmr_config_u64(r, "ssm_state_size", 1, 4096, true, 0, &c->ssm_state_size);
    llmr_config_u64(r, "conv_kernel", 1, 64, true, 0, &c->conv_kernel);
    llmr_config_bool(r, "use_conv_bias", false, true, &c->use_conv_bias);
    llmr_config_bool(r, "mamba_proj_bias", false, false, &c->mamba_proj_bias);
    if (r->ok && c->mamba_num_heads % c->n_groups != 0)
        llmr_config_fail(r, LLMR_MODEL_CORRUPT, "mamba_num_heads",
                         "(%llu) is not a multiple of n_groups (%llu)",
                         (unsigned long long)c->mamba_num_heads, (unsigned long long)c->n_groups);
}

static void read_attention(llmr_config_reader *r, llmr_nemotron_h_config *c)
{
    llmr_config_u64(r, "num_attention_heads", 1, 1024, true, 0, &c->num_attention_heads);
    llmr_config_u64(r, "num_key_value_heads", 1, 1024, true, 0, &c->num_key_value_heads);
    uint64_t def = c->num_attention_heads ? c->hidden_size / c->num_attention_heads : 0;
    llmr_config_u64(r, "head_dim", 1, 1024, false, def, &c->head_dim);
    llmr_config_bool(r, "attention_bias", false, false, &c->attention_bias);
    if (r->ok && c->head_dim == 0)
        llmr_config_fail(r, LLMR_MODEL_CORRUPT, "head_dim", "is missing and hidden_size / "
                                                            "num_attention_heads is 0");
    if (r->ok && c->num_attention_heads % c->num_key_value_heads != 0)
        llmr_config_fail(r, LLMR_MODEL_CORRUPT, "num_attention_heads",
                         "(%llu) is not a multiple of num_key_value_heads (%llu)",
                         (unsigned long long)c->num_attention_heads,
                         (unsigned long long)c->num_key_value_heads);
}

static void read_moe(llmr_config_reader *r, llmr_nemotron_h_config *c, llmr_strbuf *unsupported)
{
    llmr_config_u64(r, "n_routed_experts", 1, 4096, true, 0, &c->n_routed_experts);
    llmr_config_u64(r, "num_experts_per_tok", 1, 4096, true, 0, &c->num_experts_per_tok);
    llmr_config_u64(r, "moe_intermediate_size", 1, 1u << 20, true, 0, &c->moe_intermediate_size);
    llmr_config_u64(r, "n_shared_experts", 0, 64, false, 0, &c->n_shared_experts);
    if (c->n_shared_experts)
        llmr_config_u64(r, "moe_shared_expert_intermediate_size", 1, 1u << 20, true, 0,
                        &c->moe_shared_expert_intermediate_size);
    llmr_config_f64(r, "routed_scaling_factor", 0, 1e6, false, 1.0, &c->routed_scaling_factor);
    if (r->ok && c->num_experts_per_tok > c->n_routed_experts)
        llmr_config_fail(r, LLMR_MODEL_CORRUPT, "num_experts_per_tok",
                         "(%llu) is more than n_routed_experts (%llu)",
                         (unsigned long long)c->num_experts_per_tok,
                         (unsigned long long)c->n_routed_experts);
    const json_t *latent = json_object_get(r->root, "moe_latent_size");
    if (latent && !json_is_null(latent) && unsupported->len == 0)
        llmr_strbuf_puts(unsupported, "moe_latent_size is set: latent mixture-of-experts layers "
                                      "are not supported");
}

llmr_status llmr_nemotron_h_config_parse(const json_t *root, const char *file,
                                         llmr_nemotron_h_config *c, llmr_strbuf *unsupported,
                                         llmr_problems *problems)
{
    memset(c, 0, sizeof *c);
    llmr_config_reader r;
    llmr_config_reader_init(&r, root, file, "nemotron_h", problems);
    llmr_config_u64(&r, "hidden_size", 1, 65536, true, 0, &c->hidden_size);
    llmr_config_u64(&r, "vocab_size", 1, 1u << 22, true, 0, &c->vocab_size);
    llmr_config_u64(&r, "max_position_embeddings", 1, 1u << 24, false, 4096,
                    &c->max_position_embeddings);
    if (json_object_get(root, "layer_norm_epsilon"))
        llmr_config_f64(&r, "layer_norm_epsilon", 1e-12, 1.0, true, 0, &c->norm_eps);
    else
        llmr_config_f64(&r, "norm_eps", 1e-12, 1.0, false, 1e-5, &c->norm_eps);
    llmr_config_bool(&r, "tie_word_embeddings", false, false, &c->tie_word_embeddings);
    read_layers(&r, c);
    if (!r.ok)
        return LLMR_MODEL_CORRUPT;
    if (strchr(c->layers, LLMR_NEMOTRON_H_MAMBA))
        read_mamba(&r, c);
    if (strchr(c->layers, LLMR_NEMOTRON_H_ATTENTION))
        read_attention(&r, c);
    if (strchr(c->layers, LLMR_NEMOTRON_H_MLP)) {
        llmr_config_u64(&r, "intermediate_size", 1, 1u << 20, true, 0, &c->intermediate_size);
        llmr_config_bool(&r, "mlp_bias", false, false, &c->mlp_bias);
    }
    if (strchr(c->layers, LLMR_NEMOTRON_H_MOE))
        read_moe(&r, c, unsupported);
    if (!r.ok)
        return LLMR_MODEL_CORRUPT;

    const json_t *q = json_object_get(root, "quantization_config");
    if (q && !json_is_null(q) && unsupported->len == 0) {
        const json_t *method = json_is_object(q) ? json_object_get(q, "quant_method") : NULL;
        llmr_strbuf got = LLMR_STRBUF_INIT;
        llmr_json_describe(&got, method ? method : json_null());
        llmr_strbuf_printf(unsupported,
                           "quantization_config.quant_method is %s: llmr loads unquantized "
                           "(BF16/F16/F32) Nemotron-H checkpoints only",
                           llmr_strbuf_cstr(&got));
        llmr_strbuf_free(&got);
    }
    return unsupported->len ? LLMR_UNSUPPORTED : LLMR_OK;
}

void llmr_nemotron_h_expected_tensors(const llmr_nemotron_h_config *c, llmr_tensor_specs *s)
{
    const llmr_dtype_rule F = LLMR_DTYPE_RULE_ANY_FLOAT;
    const llmr_dtype D = LLMR_DTYPE_BF16; /* unused with ANY_FLOAT */
    uint64_t h = c->hidden_size;
    uint64_t d_inner = c->mamba_num_heads * c->mamba_head_dim;
    uint64_t bc = 2 * c->n_groups * c->ssm_state_size; /* the B and C projections */
    uint64_t conv_dim = d_inner + bc;
    uint64_t in_proj = 2 * d_inner + bc + c->mamba_num_heads; /* z, xBC, dt */
    uint64_t q = c->num_attention_heads * c->head_dim;
    uint64_t kv = c->num_key_value_heads * c->head_dim;
    uint64_t shared = c->moe_shared_expert_intermediate_size * c->n_shared_experts;
    const char *p = "backbone.layers";

    llmr_tensor_specs_add(s, F, D, 2, (uint64_t[]){c->vocab_size, h}, "backbone.embeddings.weight");
    for (uint64_t l = 0; l < c->num_hidden_layers; l++) {
        unsigned long long L = (unsigned long long)l;
        llmr_tensor_specs_add(s, F, D, 1, (uint64_t[]){h}, "%s.%llu.norm.weight", p, L);
        switch (c->layers[l]) {
        case LLMR_NEMOTRON_H_MAMBA:
            llmr_tensor_specs_add(s, F, D, 2, (uint64_t[]){in_proj, h}, "%s.%llu.mixer.in_proj.weight", p, L);
            llmr_tensor_specs_add(s, F, D, 3, (uint64_t[]){conv_dim, 1, c->conv_kernel},
                                  "%s.%llu.mixer.conv1d.weight", p, L);
            if (c->use_conv_bias)
                llmr_tensor_specs_add(s, F, D, 1, (uint64_t[]){conv_dim}, "%s.%llu.mixer.conv1d.bias", p, L);
            llmr_tensor_specs_add(s, F, D, 1, (uint64_t[]){c->mamba_num_heads}, "%s.%llu.mixer.dt_bias", p, L);
            llmr_tensor_specs_add(s, F, D, 1, (uint64_t[]){c->mamba_num_heads}, "%s.%llu.mixer.A_log", p, L);
            llmr_tensor_specs_add(s, F, D, 1, (uint64_t[]){c->mamba_num_heads}, "%s.%llu.mixer.D", p, L);
            llmr_tensor_specs_add(s, F, D, 1, (uint64_t[]){d_inner}, "%s.%llu.mixer.norm.weight", p, L);
            llmr_tensor_specs_add(s, F, D, 2, (uint64_t[]){h, d_inner}, "%s.%llu.mixer.out_proj.weight", p, L);
            if (c->mamba_proj_bias) {
                llmr_tensor_specs_add(s, F, D, 1, (uint64_t[]){in_proj}, "%s.%llu.mixer.in_proj.bias", p, L);
                llmr_tensor_specs_add(s, F, D, 1, (uint64_t[]){h}, "%s.%llu.mixer.out_proj.bias", p, L);
            }
            break;
        case LLMR_NEMOTRON_H_ATTENTION:
            llmr_tensor_specs_add(s, F, D, 2, (uint64_t[]){q, h}, "%s.%llu.mixer.q_proj.weight", p, L);
            llmr_tensor_specs_add(s, F, D, 2, (uint64_t[]){kv, h}, "%s.%llu.mixer.k_proj.weight", p, L);
            llmr_tensor_specs_add(s, F, D, 2, (uint64_t[]){kv, h}, "%s.%llu.mixer.v_proj.weight", p, L);
            llmr_tensor_specs_add(s, F, D, 2, (uint64_t[]){h, q}, "%s.%llu.mixer.o_proj.weight", p, L);
            if (c->attention_bias) {
                llmr_tensor_specs_add(s, F, D, 1, (uint64_t[]){q}, "%s.%llu.mixer.q_proj.bias", p, L);
                llmr_tensor_specs_add(s, F, D, 1, (uint64_t[]){kv}, "%s.%llu.mixer.k_proj.bias", p, L);
                llmr_tensor_specs_add(s, F, D, 1, (uint64_t[]){kv}, "%s.%llu.mixer.v_proj.bias", p, L);
                llmr_tensor_specs_add(s, F, D, 1, (uint64_t[]){h}, "%s.%llu.mixer.o_proj.bias", p, L);
            }
            break;
        case LLMR_NEMOTRON_H_MLP:
            llmr_tensor_specs_add(s, F, D, 2, (uint64_t[]){c->intermediate_size, h},
                                  "%s.%llu.mixer.up_proj.weight", p, L);
            llmr_tensor_specs_add(s, F, D, 2, (uint64_t[]){h, c->intermediate_size},
                                  "%s.%llu.mixer.down_proj.weight", p, L);
            if (c->mlp_bias) {
                llmr_tensor_specs_add(s, F, D, 1, (uint64_t[]){c->intermediate_size},
                                      "%s.%llu.mixer.up_proj.bias", p, L);
                llmr_tensor_specs_add(s, F, D, 1, (uint64_t[]){h}, "%s.%llu.mixer.down_proj.bias", p, L);
            }
            break;
        case LLMR_NEMOTRON_H_MOE:
            llmr_tensor_specs_add(s, F, D, 2, (uint64_t[]){c->n_routed_experts, h},
                                  "%s.%llu.mixer.gate.weight", p, L);
            llmr_tensor_specs_add(s, F, D, 1, (uint64_t[]){c->n_routed_experts},
                                  "%s.%llu.mixer.gate.e_score_correction_bias", p, L);
            for (uint64_t e = 0; e < c->n_routed_experts; e++) {
                unsigned long long E = (unsigned long long)e;
                llmr_tensor_specs_add(s, F, D, 2, (uint64_t[]){c->moe_intermediate_size, h},
                                      "%s.%llu.mixer.experts.%llu.up_proj.weight", p, L, E);
                llmr_tensor_specs_add(s, F, D, 2, (uint64_t[]){h, c->moe_intermediate_size},
                                      "%s.%llu.mixer.experts.%llu.down_proj.weight", p, L, E);
            }
            if (shared) {
                llmr_tensor_specs_add(s, F, D, 2, (uint64_t[]){shared, h},
                                      "%s.%llu.mixer.shared_experts.up_proj.weight", p, L);
                llmr_tensor_specs_add(s, F, D, 2, (uint64_t[]){h, shared},
                                      "%s.%llu.mixer.shared_experts.down_proj.weight", p, L);
            }
            break;
        }
    }
    llmr_tensor_specs_add(s, F, D, 1, (uint64_t[]){h}, "backbone.norm_f.weight");
    if (!c->tie_word_embeddings)
        llmr_tensor_specs_add(s, F, D, 2, (uint64_t[]){c->vocab_size, h}, "lm_head.weight");
}

json_t *llmr_nemotron_h_config_to_json(const llmr_nemotron_h_config *c)
{
    json_t *o = json_object();
#define PUT_U64(field) json_object_set_new(o, #field, json_integer((json_int_t)c->field))
    PUT_U64(hidden_size);
    PUT_U64(vocab_size);
    PUT_U64(num_hidden_layers);
    json_object_set_new(o, "hybrid_override_pattern", json_string(c->layers));
    if (strchr(c->layers, LLMR_NEMOTRON_H_MAMBA)) {
        PUT_U64(mamba_num_heads);
        PUT_U64(mamba_head_dim);
        PUT_U64(n_groups);
        PUT_U64(ssm_state_size);
        PUT_U64(conv_kernel);
    }
    if (strchr(c->layers, LLMR_NEMOTRON_H_ATTENTION)) {
        PUT_U64(num_attention_heads);
        PUT_U64(num_key_value_heads);
        PUT_U64(head_dim);
    }
    if (strchr(c->layers, LLMR_NEMOTRON_H_MLP))
        PUT_U64(intermediate_size);
    if (strchr(c->layers, LLMR_NEMOTRON_H_MOE)) {
        PUT_U64(n_routed_experts);
        PUT_U64(num_experts_per_tok);
        PUT_U64(moe_intermediate_size);
        PUT_U64(n_shared_experts);
        PUT_U64(moe_shared_expert_intermediate_size);
        json_object_set_new(o, "routed_scaling_factor", json_real(c->routed_scaling_factor));
    }
    PUT_U64(max_position_embeddings);
#undef PUT_U64
    json_object_set_new(o, "norm_eps", json_real(c->norm_eps));
    json_object_set_new(o, "tie_word_embeddings", json_boolean(c->tie_word_embeddings));
    return o;
}
