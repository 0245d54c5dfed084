/* gpt-oss config and tensor layout: see gpt_oss_config.h. */
#include "models/gpt_oss_config.h"

#include <string.h>

#include "common/json_util.h"
#include "models/config_reader.h"

#define MXFP4_BLOCK 32u /* elements per E8M0 scale */
#define MXFP4_BLOCK_BYTES 16u

static void read_layer_types(llmr_config_reader *r, llmr_gpt_oss_config *c)
{
    const json_t *types = json_object_get(r->root, "layer_types");
    if (!types || json_is_null(types)) {
        /* The transformers default: even layers sliding, odd layers full. */
        for (uint64_t i = 0; i < c->num_hidden_layers; i++)
            c->layer_types[i] = i % 2 ? LLMR_GPT_OSS_FULL_ATTENTION : LLMR_GPT_OSS_SLIDING_ATTENTION;
        return;
    }
    if (!json_is_array(types) || json_array_size(types) != c->num_hidden_layers) {
        llmr_config_fail(r, LLMR_MODEL_CORRUPT, "layer_types",
                         "must be an array of num_hidden_layers (%llu) strings",
                         (unsigned long long)c->num_hidden_layers);
        return;
    }
    size_t i;
    const json_t *t;
    json_array_foreach(types, i, t) {
        const char *s = json_string_value(t);
        if (s && strcmp(s, "sliding_attention") == 0) {
            c->layer_types[i] = LLMR_GPT_OSS_SLIDING_ATTENTION;
        } else if (s && strcmp(s, "full_attention") == 0) {
            c->layer_types[i] = LLMR_GPT_OSS_FULL_ATTENTION;
        } else {
            llmr_strbuf got = LLMR_STRBUF_INIT;
            llmr_json_describe(&got, t);
            llmr_config_fail(r, LLMR_MODEL_CORRUPT, "layer_types",
                             "[%zu] must be \"sliding_attention\" or \"full_attention\", got %s", i,
                             llmr_strbuf_cstr(&got));
            llmr_strbuf_free(&got);
            return;
        }
    }
}

static void read_token_ids(llmr_config_reader *r, llmr_gpt_oss_config *c)
{
    c->pad_token_id = -1;
    const json_t *pad = json_object_get(r->root, "pad_token_id");
    uint64_t id;
    if (pad && !json_is_null(pad) &&
        llmr_config_u64(r, "pad_token_id", 0, c->vocab_size - 1, true, 0, &id))
        c->pad_token_id = (int64_t)id;

    const json_t *eos = json_object_get(r->root, "eos_token_id");
    if (!eos || json_is_null(eos))
        return;
    if (!json_is_array(eos)) {
        if (llmr_config_u64(r, "eos_token_id", 0, c->vocab_size - 1, true, 0, &c->eos_token_ids[0]))
            c->eos_count = 1;
        return;
    }
    if (json_array_size(eos) > LLMR_GPT_OSS_MAX_EOS) {
        llmr_config_fail(r, LLMR_MODEL_CORRUPT, "eos_token_id", "lists more than %u ids",
                         LLMR_GPT_OSS_MAX_EOS);
        return;
    }
    size_t i;
    const json_t *v;
    json_array_foreach(eos, i, v) {
        if (!llmr_json_as_u64(v, &id) || id >= c->vocab_size) {
            llmr_config_fail(r, LLMR_MODEL_CORRUPT, "eos_token_id",
                             "[%zu] must be a token id below vocab_size", i);
            return;
        }
        c->eos_token_ids[c->eos_count++] = id;
    }
}

static void read_rope(llmr_config_reader *r, llmr_gpt_oss_config *c, llmr_strbuf *unsupported)
{
    llmr_config_f64(r, "rope_theta", 1.0, 1e12, true, 0, &c->rope_theta);
    const json_t *rs = json_object_get(r->root, "rope_scaling");
    if (!rs || json_is_null(rs))
        return;
    if (!json_is_object(rs)) {
        llmr_config_fail(r, LLMR_MODEL_CORRUPT, "rope_scaling", "must be an object or null");
        return;
    }
    const json_t *type = json_object_get(rs, "rope_type");
    if (!type)
        type = json_object_get(rs, "type");
    if (!json_is_string(type) || strcmp(json_string_value(type), "yarn") != 0) {
        llmr_strbuf got = LLMR_STRBUF_INIT;
        llmr_json_describe(&got, type ? type : json_null());
        llmr_strbuf_printf(unsupported,
                           "rope_scaling.rope_type is %s; the gpt-oss engine implements yarn",
                           llmr_strbuf_cstr(&got));
        llmr_strbuf_free(&got);
        return;
    }
    c->has_yarn = true;
    llmr_config_f64_in(r, rs, "rope_scaling", "factor", 1.0, 1e6, true, 0, &c->yarn.factor);
    llmr_config_f64_in(r, rs, "rope_scaling", "beta_fast", 0, 1e6, false, 32.0, &c->yarn.beta_fast);
    llmr_config_f64_in(r, rs, "rope_scaling", "beta_slow", 0, 1e6, false, 1.0, &c->yarn.beta_slow);
    llmr_config_u64_in(r, rs, "rope_scaling", "original_max_position_embeddings", 1, 1u << 24,
                       true, 0, &c->yarn.original_max_position_embeddings);
    const json_t *tr = json_object_get(rs, "truncate");
    if (tr && !json_is_boolean(tr))
        llmr_config_fail(r, LLMR_MODEL_CORRUPT, "rope_scaling.truncate", "must be true or false");
    c->yarn.truncate = !tr || json_is_true(tr); /* transformers' default is true */
}

static void read_quantization(llmr_config_reader *r, llmr_strbuf *unsupported)
{
    const json_t *q = json_object_get(r->root, "quantization_config");
    const json_t *method = json_is_object(q) ? json_object_get(q, "quant_method") : NULL;
    if (json_is_string(method) && strcmp(json_string_value(method), "mxfp4") == 0)
        return;
    if (!q || json_is_null(q)) {
        llmr_strbuf_puts(unsupported, "config.json has no quantization_config: this is a "
                                      "dequantized gpt-oss checkpoint, and the gpt-oss engine "
                                      "runs the original MXFP4 experts only");
        return;
    }
    llmr_strbuf got = LLMR_STRBUF_INIT;
    llmr_json_describe(&got, method ? method : json_null());
    llmr_strbuf_printf(unsupported,
                       "quantization_config.quant_method is %s; the gpt-oss engine runs mxfp4",
                       llmr_strbuf_cstr(&got));
    llmr_strbuf_free(&got);
}

llmr_status llmr_gpt_oss_config_parse(const json_t *root, const char *file,
                                      llmr_gpt_oss_config *c, llmr_strbuf *unsupported,
                                      llmr_problems *problems)
{
    memset(c, 0, sizeof *c);
    llmr_config_reader r;
    llmr_config_reader_init(&r, root, file, "gpt_oss", problems);
    llmr_config_u64(&r, "hidden_size", 32, 65536, true, 0, &c->hidden_size);
    llmr_config_u64(&r, "num_hidden_layers", 1, LLMR_GPT_OSS_MAX_LAYERS, true, 0,
                    &c->num_hidden_layers);
    llmr_config_u64(&r, "num_attention_heads", 1, 1024, true, 0, &c->num_attention_heads);
    llmr_config_u64(&r, "num_key_value_heads", 1, 1024, true, 0, &c->num_key_value_heads);
    llmr_config_u64(&r, "head_dim", 1, 1024, true, 0, &c->head_dim);
    llmr_config_u64(&r, "vocab_size", 1, 1u << 22, true, 0, &c->vocab_size);
    llmr_config_u64(&r, "num_local_experts", 1, 1024, true, 0, &c->num_local_experts);
    llmr_config_u64(&r, "intermediate_size", 32, 262144, true, 0, &c->intermediate_size);
    llmr_config_u64(&r, "max_position_embeddings", 1, 1u << 24, true, 0,
                    &c->max_position_embeddings);
    llmr_config_u64(&r, "sliding_window", 1, 1u << 24, true, 0, &c->sliding_window);
    llmr_config_f64(&r, "rms_norm_eps", 1e-12, 1.0, true, 0, &c->rms_norm_eps);
    llmr_config_f64(&r, "swiglu_limit", 0.0, 1e6, false, 7.0, &c->swiglu_limit);
    llmr_config_bool(&r, "attention_bias", false, true, &c->attention_bias);
    llmr_config_bool(&r, "tie_word_embeddings", false, false, &c->tie_word_embeddings);

    /* Two spellings of the top-k in published configs; both present must agree. */
    uint64_t k1 = 0, k2 = 0;
    bool has1 = json_object_get(root, "num_experts_per_tok") != NULL;
    bool has2 = json_object_get(root, "experts_per_token") != NULL;
    if (has1)
        llmr_config_u64(&r, "num_experts_per_tok", 1, 1024, true, 0, &k1);
    if (has2)
        llmr_config_u64(&r, "experts_per_token", 1, 1024, true, 0, &k2);
    if (!has1 && !has2)
        llmr_config_u64(&r, "num_experts_per_tok", 1, 1024, true, 0, &k1);
    if (has1 && has2 && k1 != k2)
        llmr_config_fail(&r, LLMR_MODEL_CORRUPT, "num_experts_per_tok",
                         "(%llu) and experts_per_token (%llu) disagree", (unsigned long long)k1,
                         (unsigned long long)k2);
    c->num_experts_per_tok = has1 ? k1 : k2;

    /* The checks below need these; when they are bad, what was found is enough. */
    if (!c->num_hidden_layers || !c->vocab_size || !c->num_attention_heads ||
        !c->num_key_value_heads || !c->num_local_experts)
        return LLMR_MODEL_CORRUPT;
    if (c->num_attention_heads % c->num_key_value_heads != 0)
        llmr_config_fail(&r, LLMR_MODEL_CORRUPT, "num_attention_heads",
                         "(%llu) is not a multiple of num_key_value_heads (%llu)",
                         (unsigned long long)c->num_attention_heads,
                         (unsigned long long)c->num_key_value_heads);
    if (c->num_experts_per_tok > c->num_local_experts)
        llmr_config_fail(&r, LLMR_MODEL_CORRUPT, "num_experts_per_tok",
                         "(%llu) is more than num_local_experts (%llu)",
                         (unsigned long long)c->num_experts_per_tok,
                         (unsigned long long)c->num_local_experts);
    read_layer_types(&r, c);
    read_token_ids(&r, c);
    read_rope(&r, c, unsupported);
    if (!r.ok)
        return LLMR_MODEL_CORRUPT;

    if (unsupported->len == 0)
        read_quantization(&r, unsupported);
    if (unsupported->len == 0 &&
        (c->hidden_size % MXFP4_BLOCK != 0 || c->intermediate_size % MXFP4_BLOCK != 0))
        llmr_strbuf_printf(unsupported,
                           "hidden_size (%llu) and intermediate_size (%llu) must be multiples "
                           "of the MXFP4 block of %u",
                           (unsigned long long)c->hidden_size,
                           (unsigned long long)c->intermediate_size, MXFP4_BLOCK);
    return unsupported->len ? LLMR_UNSUPPORTED : LLMR_OK;
}

void llmr_gpt_oss_expected_tensors(const llmr_gpt_oss_config *c, llmr_tensor_specs *s)
{
    const llmr_dtype_rule X = LLMR_DTYPE_RULE_EXACT;
    const llmr_dtype BF16 = LLMR_DTYPE_BF16, U8 = LLMR_DTYPE_U8;
    uint64_t h = c->hidden_size, v = c->vocab_size, e = c->num_local_experts;
    uint64_t q = c->num_attention_heads * c->head_dim;
    uint64_t kv = c->num_key_value_heads * c->head_dim;
    uint64_t i2 = 2 * c->intermediate_size; /* gate and up, interleaved by row */

    llmr_tensor_specs_add(s, X, BF16, 2, (uint64_t[]){v, h}, "model.embed_tokens.weight");
    for (uint64_t l = 0; l < c->num_hidden_layers; l++) {
        unsigned long long L = (unsigned long long)l;
        const char *p = "model.layers";
        llmr_tensor_specs_add(s, X, BF16, 1, (uint64_t[]){h}, "%s.%llu.input_layernorm.weight", p, L);
        llmr_tensor_specs_add(s, X, BF16, 1, (uint64_t[]){h},
                              "%s.%llu.post_attention_layernorm.weight", p, L);
        llmr_tensor_specs_add(s, X, BF16, 2, (uint64_t[]){q, h}, "%s.%llu.self_attn.q_proj.weight", p, L);
        llmr_tensor_specs_add(s, X, BF16, 2, (uint64_t[]){kv, h}, "%s.%llu.self_attn.k_proj.weight", p, L);
        llmr_tensor_specs_add(s, X, BF16, 2, (uint64_t[]){kv, h}, "%s.%llu.self_attn.v_proj.weight", p, L);
        llmr_tensor_specs_add(s, X, BF16, 2, (uint64_t[]){h, q}, "%s.%llu.self_attn.o_proj.weight", p, L);
        if (c->attention_bias) {
            llmr_tensor_specs_add(s, X, BF16, 1, (uint64_t[]){q}, "%s.%llu.self_attn.q_proj.bias", p, L);
            llmr_tensor_specs_add(s, X, BF16, 1, (uint64_t[]){kv}, "%s.%llu.self_attn.k_proj.bias", p, L);
            llmr_tensor_specs_add(s, X, BF16, 1, (uint64_t[]){kv}, "%s.%llu.self_attn.v_proj.bias", p, L);
            llmr_tensor_specs_add(s, X, BF16, 1, (uint64_t[]){h}, "%s.%llu.self_attn.o_proj.bias", p, L);
        }
        llmr_tensor_specs_add(s, X, BF16, 1, (uint64_t[]){c->num_attention_heads},
                              "%s.%llu.self_attn.sinks", p, L);
        llmr_tensor_specs_add(s, X, BF16, 2, (uint64_t[]){e, h}, "%s.%llu.mlp.router.weight", p, L);
        llmr_tensor_specs_add(s, X, BF16, 1, (uint64_t[]){e}, "%s.%llu.mlp.router.bias", p, L);
        llmr_tensor_specs_add(s, X, U8, 4, (uint64_t[]){e, i2, h / MXFP4_BLOCK, MXFP4_BLOCK_BYTES},
                              "%s.%llu.mlp.experts.gate_up_proj_blocks", p, L);
        llmr_tensor_specs_add(s, X, U8, 3, (uint64_t[]){e, i2, h / MXFP4_BLOCK},
                              "%s.%llu.mlp.experts.gate_up_proj_scales", p, L);
        llmr_tensor_specs_add(s, X, BF16, 2, (uint64_t[]){e, i2},
                              "%s.%llu.mlp.experts.gate_up_proj_bias", p, L);
        llmr_tensor_specs_add(s, X, U8, 4,
                              (uint64_t[]){e, h, c->intermediate_size / MXFP4_BLOCK, MXFP4_BLOCK_BYTES},
                              "%s.%llu.mlp.experts.down_proj_blocks", p, L);
        llmr_tensor_specs_add(s, X, U8, 3, (uint64_t[]){e, h, c->intermediate_size / MXFP4_BLOCK},
                              "%s.%llu.mlp.experts.down_proj_scales", p, L);
        llmr_tensor_specs_add(s, X, BF16, 2, (uint64_t[]){e, h},
                              "%s.%llu.mlp.experts.down_proj_bias", p, L);
    }
    llmr_tensor_specs_add(s, X, BF16, 1, (uint64_t[]){h}, "model.norm.weight");
    if (!c->tie_word_embeddings)
        llmr_tensor_specs_add(s, X, BF16, 2, (uint64_t[]){v, h}, "lm_head.weight");
}

json_t *llmr_gpt_oss_config_to_json(const llmr_gpt_oss_config *c)
{
    json_t *o = json_object();
    json_object_set_new(o, "hidden_size", json_integer((json_int_t)c->hidden_size));
    json_object_set_new(o, "num_hidden_layers", json_integer((json_int_t)c->num_hidden_layers));
    json_object_set_new(o, "num_attention_heads", json_integer((json_int_t)c->num_attention_heads));
    json_object_set_new(o, "num_key_value_heads", json_integer((json_int_t)c->num_key_value_heads));
    json_object_set_new(o, "head_dim", json_integer((json_int_t)c->head_dim));
    json_object_set_new(o, "vocab_size", json_integer((json_int_t)c->vocab_size));
    json_object_set_new(o, "num_local_experts", json_integer((json_int_t)c->num_local_experts));
    json_object_set_new(o, "num_experts_per_tok", json_integer((json_int_t)c->num_experts_per_tok));
    json_object_set_new(o, "intermediate_size", json_integer((json_int_t)c->intermediate_size));
    json_object_set_new(o, "sliding_window", json_integer((json_int_t)c->sliding_window));
    json_object_set_new(o, "max_position_embeddings",
                        json_integer((json_int_t)c->max_position_embeddings));
    json_object_set_new(o, "rope_theta", json_real(c->rope_theta));
    json_object_set_new(o, "rms_norm_eps", json_real(c->rms_norm_eps));
    json_object_set_new(o, "swiglu_limit", json_real(c->swiglu_limit));
    json_object_set_new(o, "attention_bias", json_boolean(c->attention_bias));
    json_object_set_new(o, "tie_word_embeddings", json_boolean(c->tie_word_embeddings));
    if (c->has_yarn) {
        json_t *y = json_object();
        json_object_set_new(y, "rope_type", json_string("yarn"));
        json_object_set_new(y, "factor", json_real(c->yarn.factor));
        json_object_set_new(y, "beta_fast", json_real(c->yarn.beta_fast));
        json_object_set_new(y, "beta_slow", json_real(c->yarn.beta_slow));
        json_object_set_new(y, "original_max_position_embeddings",
                            json_integer((json_int_t)c->yarn.original_max_position_embeddings));
        json_object_set_new(y, "truncate", json_boolean(c->yarn.truncate));
        json_object_set_new(o, "rope_scaling", y);
    }
    json_t *types = json_array();
    for (uint64_t i = 0; i < c->num_hidden_layers; i++)
        json_array_append_new(types, json_string(c->layer_types[i] == LLMR_GPT_OSS_FULL_ATTENTION
                                                     ? "full_attention"
                                                     : "sliding_attention"));
    json_object_set_new(o, "layer_types", types);
    json_t *eos = json_array();
    for (uint32_t i = 0; i < c->eos_count; i++)
        json_array_append_new(eos, json_integer((json_int_t)c->eos_token_ids[i]));
    json_object_set_new(o, "eos_token_ids", eos);
    json_object_set_new(o, "pad_token_id",
                        c->pad_token_id < 0 ? json_null() : json_integer(c->pad_token_id));
    return o;
}
