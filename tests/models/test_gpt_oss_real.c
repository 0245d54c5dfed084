/* gpt-oss with its real published metadata: a full-size snapshot made of
 * openai/gpt-oss-20b's config.json and tokenizer files (from the shared data
 * directory) plus generated shards with the real tensor names, dtypes and shapes
 * (zeros, sparse).  Skips, with the reason, when the shared data directory is absent. */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "common/fs_util.h"
#include "fixture.h"
#include "models/synth.h"
#include "storage/model_storage.h"

TEST(real_gpt_oss_20b_metadata_with_generated_shards)
{
    const char *shared = fx_shared_dir();
    if (!shared) {
        llmr_test_skip("the shared data directory is absent (set LLMR_SHARED_DIR)");
        return;
    }
    char real[4096];
    snprintf(real, sizeof real, "%s/models/gpt-oss-20b", shared);
    const char *dir = fx_tmpdir();
    char out[4096];
    snprintf(out, sizeof out, "%s/snapshot", dir);
    llmr_synth_options o = {.preset = "gpt-oss-20b", .out_dir = out, .tokenizer_from = real};
    llmr_strbuf err = LLMR_STRBUF_INIT;
    CHECK_EQ_INT(llmr_synth_snapshot(&o, &err), LLMR_OK);
    /* The published config.json, not the preset's copy of it. */
    size_t len;
    char path[4200];
    snprintf(path, sizeof path, "%s/config.json", real);
    char *config = NULL;
    CHECK_EQ_INT(llmr_read_file(path, 1 << 20, &config, &len, &err), LLMR_OK);
    fx_write(out, "config.json", config, len);
    free(config);
    llmr_strbuf_free(&err);

    llmr_model_options opts;
    llmr_model_options_default(&opts);
    opts.map_weights = true;
    llmr_problems p;
    llmr_problems_init(&p);
    llmr_model *m = NULL;
    CHECK_EQ_INT(llmr_model_open(out, &opts, &m, &p), LLMR_OK);
    for (size_t i = 0; i < p.count; i++)
        fprintf(stderr, "    %s: %s\n", p.items[i].file, p.items[i].message);
    llmr_problems_free(&p);
    if (!m)
        return;
    CHECK_EQ_INT(m->runtime, LLMR_RUNTIME_GPT_OSS);
    CHECK_EQ_INT(m->tensor_count, 459);
    CHECK(m->total_bytes > 13700000000ull && m->total_bytes < 13900000000ull);
    const llmr_gpt_oss_config *c = &m->gpt_oss;
    CHECK_EQ_INT(c->hidden_size, 2880);
    CHECK_EQ_INT(c->num_hidden_layers, 24);
    CHECK_EQ_INT(c->num_attention_heads, 64);
    CHECK_EQ_INT(c->num_key_value_heads, 8);
    CHECK_EQ_INT(c->head_dim, 64);
    CHECK_EQ_INT(c->num_local_experts, 32);
    CHECK_EQ_INT(c->num_experts_per_tok, 4);
    CHECK_EQ_INT(c->vocab_size, 201088);
    CHECK_EQ_INT(c->sliding_window, 128);
    CHECK(c->rope_theta == 150000.0 && c->yarn.factor == 32.0 && c->yarn.beta_fast == 32.0);
    CHECK(c->yarn.beta_slow == 1.0 && c->yarn.original_max_position_embeddings == 4096);
    CHECK(!c->yarn.truncate && c->swiglu_limit == 7.0 && c->rms_norm_eps == 1e-5);
    CHECK_EQ_INT(c->layer_types[0], LLMR_GPT_OSS_SLIDING_ATTENTION);
    CHECK_EQ_INT(c->layer_types[23], LLMR_GPT_OSS_FULL_ATTENTION);
    CHECK(c->eos_count == 1 && c->eos_token_ids[0] == 200002);
    const llmr_model_tensor *t = llmr_model_tensor_find(m, "model.layers.0.mlp.experts.gate_up_proj_blocks");
    CHECK(t && t->info->dtype == LLMR_DTYPE_U8 && t->info->rank == 4);
    if (t) {
        CHECK_EQ_INT(t->info->shape[0], 32);
        CHECK_EQ_INT(t->info->shape[1], 5760);
        CHECK_EQ_INT(t->info->shape[2], 90);
        CHECK_EQ_INT(t->info->shape[3], 16);
    }
    t = llmr_model_tensor_find(m, "model.layers.23.mlp.experts.down_proj_scales");
    CHECK(t && t->info->shape[1] == 2880 && t->info->shape[2] == 90);
    t = llmr_model_tensor_find(m, "lm_head.weight");
    CHECK(t && t->info->dtype == LLMR_DTYPE_BF16 && t->info->shape[0] == 201088);
    CHECK(t && m->mapped && llmr_model_tensor_data(m, t) != NULL);
    llmr_model_close(m);
}

int main(void)
{
    RUN(real_gpt_oss_20b_metadata_with_generated_shards);
    return llmr_test_finish();
}
