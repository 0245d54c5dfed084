/* Nemotron-H: load and validate.  The fixture under tests/fixtures/nemotron_h_tiny is
 * what transformers' save_pretrained wrote for a small random NemotronHForCausalLM
 * (config.json and the safetensors headers; tests/gpu/nemotron_h_fixture.py made it),
 * so the tensor names and shapes are the real ones.  The tests rebuild the shards
 * from those headers with zero data. */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "engine_host/engine_host.h"
#include "fixture.h"
#include "models/nemotron_h_config.h"
#include "storage/model_storage.h"

/* Writes shard `name` from the fixture header `header_file`, minus `drop`, with
 * `change` replacing the tensor of the same name. */
static size_t write_shard(const char *dir, const char *name, const char *header_file,
                          const char *drop, const llmr_st_write_tensor *change)
{
    char *text = fx_read_fixture(header_file, NULL);
    json_t *h = json_loads(text, 0, NULL);
    free(text);
    llmr_st_write_tensor *t;
    size_t n = fx_tensors_of_header(h, &t), k = 0;
    for (size_t i = 0; i < n; i++) {
        if (drop && strcmp(t[i].name, drop) == 0)
            continue;
        t[k++] = change && strcmp(t[i].name, change->name) == 0 ? *change : t[i];
    }
    fx_write_st(dir, name, t, k);
    free(t);
    json_decref(h);
    return k;
}

static void write_metadata(const char *dir)
{
    size_t len;
    char *config = fx_read_fixture("nemotron_h_tiny/config.json", &len);
    fx_write(dir, "config.json", config, len);
    free(config);
    fx_write_text(dir, "tokenizer.json", "{\"version\": \"1.0\"}");
}

static const char *single_snapshot(const char *drop, const llmr_st_write_tensor *change)
{
    const char *dir = fx_tmpdir();
    write_metadata(dir);
    write_shard(dir, "model.safetensors", "nemotron_h_tiny/model.safetensors.header.json", drop,
                change);
    return dir;
}

TEST(the_saved_model_validates_and_maps)
{
    const char *dir = single_snapshot(NULL, NULL);
    llmr_model_options o;
    llmr_model_options_default(&o);
    o.map_weights = true;
    llmr_problems p;
    llmr_problems_init(&p);
    llmr_model *m = NULL;
    CHECK_EQ_INT(llmr_model_open(dir, &o, &m, &p), LLMR_OK);
    for (size_t i = 0; i < p.count; i++)
        fprintf(stderr, "    %s: %s\n", p.items[i].file, p.items[i].message);
    llmr_problems_free(&p);
    if (!m)
        return;
    CHECK_EQ_INT(m->runtime, LLMR_RUNTIME_NEMOTRON_H);
    CHECK_EQ_STR(m->architecture, "NemotronHForCausalLM");
    CHECK_EQ_STR(m->nemotron_h.layers, "M*EM-E");
    CHECK_EQ_INT(m->tensor_count, 55);
    CHECK(m->mapped);
    for (size_t i = 0; i < m->tensor_count; i++)
        CHECK(llmr_model_tensor_data(m, &m->tensors[i]) != NULL);
    CHECK_EQ_INT(json_array_size(m->warnings), 0);
    CHECK_CONTAINS(json_string_value(json_array_get(m->notes, 0)), "does not generate text");
    llmr_model_close(m);
}

TEST(a_node_says_there_is_no_nemotron_generation)
{
    /* An engine host (the node's) adds the sound model as not ready, and the reason
     * says that Nemotron-H text generation does not exist yet, not only that no
     * plugin fits; loading it (what a request does) is refused with that reason. */
    const char *dir = single_snapshot(NULL, NULL);
    llmr_engine_host_options o;
    llmr_engine_host_options_default(&o);
    o.monitor_no_thread = true;
    llmr_problems p;
    llmr_problems_init(&p);
    llmr_strbuf err = LLMR_STRBUF_INIT;
    llmr_engine_host *h = NULL;
    CHECK_EQ_INT(llmr_engine_host_create(&o, &h, &p, &err), LLMR_OK);
    llmr_problems_free(&p);
    if (!h)
        return;
    llmr_model_spec spec = {.name = "nemotron", .dir = dir};
    CHECK_EQ_INT(llmr_engine_host_add_model(h, &spec, &err), LLMR_OK);
    json_t *status = llmr_engine_host_status(h);
    char *text = json_dumps(status, JSON_COMPACT);
    CHECK_CONTAINS(text, "Nemotron-H weights load and validate, but llmr does not generate text with them yet");
    free(text);
    json_decref(status);
    llmr_strbuf_reset(&err);
    CHECK(llmr_engine_host_load(h, "nemotron", &err) != LLMR_OK);
    CHECK_CONTAINS(llmr_strbuf_cstr(&err), "does not generate text");
    llmr_strbuf_free(&err);
    llmr_engine_host_free(h);
}

TEST(the_sharded_save_validates_too)
{
    const char *dir = fx_tmpdir();
    write_metadata(dir);
    size_t len;
    char *index = fx_read_fixture("nemotron_h_tiny/sharded/model.safetensors.index.json", &len);
    fx_write(dir, "model.safetensors.index.json", index, len);
    free(index);
    size_t a = write_shard(dir, "model-00001-of-00002.safetensors",
                           "nemotron_h_tiny/sharded/model-00001-of-00002.safetensors.header.json",
                           NULL, NULL);
    size_t b = write_shard(dir, "model-00002-of-00002.safetensors",
                           "nemotron_h_tiny/sharded/model-00002-of-00002.safetensors.header.json",
                           NULL, NULL);
    CHECK_EQ_INT(a + b, 55);
    llmr_problems p;
    CHECK_EQ_INT(fx_open(dir, "safetensors", &p), LLMR_OK);
    llmr_problems_free(&p);
}

TEST(a_missing_expert_is_named)
{
    const char *name = "backbone.layers.5.mixer.experts.3.down_proj.weight";
    const char *dir = single_snapshot(name, NULL);
    llmr_problems p;
    CHECK_EQ_INT(fx_open(dir, "auto", &p), LLMR_MODEL_CORRUPT);
    CHECK_EQ_INT(p.count, 1);
    CHECK(llmr_problems_mention(&p, "tensor backbone.layers.5.mixer.experts.3.down_proj.weight is "
                                    "required by config.json (nemotron_h, layers M*EM-E)"));
    llmr_problems_free(&p);
}

TEST(a_misshaped_mamba_projection_is_named_with_the_expected_shape)
{
    llmr_st_write_tensor bad = {"backbone.layers.3.mixer.in_proj.weight", LLMR_DTYPE_BF16, 2, {160, 64}};
    const char *dir = single_snapshot(NULL, &bad);
    llmr_problems p;
    CHECK_EQ_INT(fx_open(dir, "auto", &p), LLMR_MODEL_CORRUPT);
    CHECK(llmr_problems_mention(&p, "tensor backbone.layers.3.mixer.in_proj.weight has shape "
                                    "[160, 64], but config.json (nemotron_h, layers M*EM-E) "
                                    "implies [164, 64]"));
    CHECK_EQ_STR(p.items[0].file, "model.safetensors");
    llmr_problems_free(&p);

    llmr_st_write_tensor conv = {"backbone.layers.0.mixer.conv1d.weight", LLMR_DTYPE_I32, 3, {96, 1, 4}};
    dir = single_snapshot(NULL, &conv);
    CHECK_EQ_INT(fx_open(dir, "auto", &p), LLMR_MODEL_CORRUPT);
    CHECK(llmr_problems_mention(&p, "is I32, expected F32, F16 or BF16"));
    llmr_problems_free(&p);
}

/* Nemotron 3 Nano 30B-A3B's published config.json (the fields that matter here). */
static const char *nano_config =
    "{\"architectures\": [\"NemotronHForCausalLM\"], \"model_type\": \"nemotron_h\","
    " \"hidden_size\": 2688, \"vocab_size\": 131072, \"num_hidden_layers\": 52,"
    " \"hybrid_override_pattern\": \"MEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEMEM*EMEMEMEME\","
    " \"mamba_num_heads\": 64, \"mamba_head_dim\": 64, \"n_groups\": 8, \"ssm_state_size\": 128,"
    " \"conv_kernel\": 4, \"use_conv_bias\": true, \"mamba_proj_bias\": false,"
    " \"num_attention_heads\": 32, \"num_key_value_heads\": 2, \"head_dim\": 128,"
    " \"attention_bias\": false, \"intermediate_size\": 1856, \"mlp_bias\": false,"
    " \"n_routed_experts\": 128, \"num_experts_per_tok\": 6, \"moe_intermediate_size\": 1856,"
    " \"moe_shared_expert_intermediate_size\": 3712, \"n_shared_experts\": 1,"
    " \"routed_scaling_factor\": 2.5, \"layer_norm_epsilon\": 1e-05,"
    " \"max_position_embeddings\": 262144, \"tie_word_embeddings\": false}";

TEST(nemotron_3_nano_config_implies_its_real_tensor_list)
{
    json_t *cfg = json_loads(nano_config, 0, NULL);
    llmr_nemotron_h_config c;
    llmr_strbuf unsupported = LLMR_STRBUF_INIT;
    llmr_problems p;
    llmr_problems_init(&p);
    CHECK_EQ_INT(llmr_nemotron_h_config_parse(cfg, "config.json", &c, &unsupported, &p), LLMR_OK);
    llmr_tensor_specs s;
    llmr_tensor_specs_init(&s);
    llmr_nemotron_h_expected_tensors(&c, &s);
    /* 23 Mamba layers x 8 + 6 attention x 4 + 23 MoE x (2 + 128 x 2 + 2) + 52 norms + 3. */
    CHECK_EQ_INT(s.count, 23 * 8 + 6 * 4 + 23 * 260 + 52 + 3);
    for (size_t i = 0; i < s.count; i++) {
        if (strcmp(s.items[i].name, "backbone.layers.0.mixer.in_proj.weight") == 0)
            CHECK(s.items[i].shape[0] == 10304 && s.items[i].shape[1] == 2688);
        if (strcmp(s.items[i].name, "backbone.layers.0.mixer.conv1d.weight") == 0)
            CHECK(s.items[i].shape[0] == 6144 && s.items[i].shape[2] == 4);
        if (strcmp(s.items[i].name, "backbone.layers.1.mixer.shared_experts.up_proj.weight") == 0)
            CHECK(s.items[i].shape[0] == 3712);
        if (strcmp(s.items[i].name, "backbone.layers.5.mixer.k_proj.weight") == 0)
            CHECK(s.items[i].shape[0] == 256);
    }
    llmr_tensor_specs_free(&s);

    json_object_set_new(cfg, "quantization_config", json_pack("{s:s}", "quant_method", "modelopt"));
    CHECK_EQ_INT(llmr_nemotron_h_config_parse(cfg, "config.json", &c, &unsupported, &p),
                 LLMR_UNSUPPORTED);
    CHECK_CONTAINS(llmr_strbuf_cstr(&unsupported), "\"modelopt\"");
    llmr_strbuf_free(&unsupported);
    llmr_problems_free(&p);
    json_decref(cfg);
}

TEST(layer_patterns_must_agree_and_be_known)
{
    json_t *cfg = json_loads(nano_config, 0, NULL);
    json_object_set_new(cfg, "layers_block_type", json_pack("[s,s]", "mamba", "moe"));
    llmr_nemotron_h_config c;
    llmr_strbuf unsupported = LLMR_STRBUF_INIT;
    llmr_problems p;
    llmr_problems_init(&p);
    CHECK_EQ_INT(llmr_nemotron_h_config_parse(cfg, "config.json", &c, &unsupported, &p),
                 LLMR_MODEL_CORRUPT);
    CHECK(llmr_problems_mention(&p, "describe different layers"));
    llmr_problems_free(&p);

    json_object_del(cfg, "layers_block_type");
    json_object_set_new(cfg, "hybrid_override_pattern", json_string("MEX"));
    llmr_problems_init(&p);
    CHECK_EQ_INT(llmr_nemotron_h_config_parse(cfg, "config.json", &c, &unsupported, &p),
                 LLMR_MODEL_CORRUPT);
    CHECK(llmr_problems_mention(&p, "hybrid_override_pattern [2] is 'X'"));
    llmr_problems_free(&p);

    json_object_set_new(cfg, "hybrid_override_pattern", json_string("ME"));
    llmr_problems_init(&p);
    CHECK_EQ_INT(llmr_nemotron_h_config_parse(cfg, "config.json", &c, &unsupported, &p),
                 LLMR_MODEL_CORRUPT);
    CHECK(llmr_problems_mention(&p, "num_hidden_layers is 52 but the layer pattern has 2 layers"));
    llmr_problems_free(&p);
    llmr_strbuf_free(&unsupported);
    json_decref(cfg);
}

int main(void)
{
    RUN(the_saved_model_validates_and_maps);
    RUN(a_node_says_there_is_no_nemotron_generation);
    RUN(the_sharded_save_validates_too);
    RUN(a_missing_expert_is_named);
    RUN(a_misshaped_mamba_projection_is_named_with_the_expected_shape);
    RUN(nemotron_3_nano_config_implies_its_real_tensor_list);
    RUN(layer_patterns_must_agree_and_be_known);
    return llmr_test_finish();
}
