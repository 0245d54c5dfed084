/* gpt-oss: the config parser and the presets.  The check against the real published
 * metadata is in test_gpt_oss_real.c. */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "fixture.h"
#include "models/gpt_oss_config.h"
#include "models/gpt_oss_preset.h"

TEST(presets_parse_and_imply_the_tensor_list)
{
    for (const char *const *name = llmr_gpt_oss_preset_names; *name; name++) {
        json_t *cfg = llmr_gpt_oss_preset_config(*name);
        CHECK(cfg != NULL);
        llmr_gpt_oss_config c;
        llmr_strbuf unsupported = LLMR_STRBUF_INIT;
        llmr_problems p;
        llmr_problems_init(&p);
        CHECK_EQ_INT(llmr_gpt_oss_config_parse(cfg, "config.json", &c, &unsupported, &p), LLMR_OK);
        llmr_tensor_specs s;
        llmr_tensor_specs_init(&s);
        llmr_gpt_oss_expected_tensors(&c, &s);
        CHECK_EQ_INT(s.count, c.num_hidden_layers * 19 + 3);
        llmr_tensor_specs_free(&s);
        llmr_strbuf_free(&unsupported);
        llmr_problems_free(&p);
        json_decref(cfg);
    }
    CHECK(llmr_gpt_oss_preset_config("gpt-oss-7b") == NULL);
}

TEST(config_rules_reject_inconsistent_values)
{
    json_t *cfg = llmr_gpt_oss_preset_config("gpt-oss-tiny");
    json_object_set_new(cfg, "experts_per_token", json_integer(3));
    json_object_set_new(cfg, "layer_types", json_pack("[s,s]", "sliding_attention", "local"));
    llmr_gpt_oss_config c;
    llmr_strbuf unsupported = LLMR_STRBUF_INIT;
    llmr_problems p;
    llmr_problems_init(&p);
    CHECK_EQ_INT(llmr_gpt_oss_config_parse(cfg, "config.json", &c, &unsupported, &p),
                 LLMR_MODEL_CORRUPT);
    CHECK(llmr_problems_mention(&p, "num_experts_per_tok (2) and experts_per_token (3) disagree"));
    CHECK(llmr_problems_mention(&p, "layer_types [1] must be"));
    llmr_problems_free(&p);

    json_object_set_new(cfg, "experts_per_token", json_integer(2));
    json_object_del(cfg, "layer_types");
    json_object_set_new(json_object_get(cfg, "rope_scaling"), "rope_type", json_string("linear"));
    llmr_problems_init(&p);
    CHECK_EQ_INT(llmr_gpt_oss_config_parse(cfg, "config.json", &c, &unsupported, &p),
                 LLMR_UNSUPPORTED);
    CHECK_CONTAINS(llmr_strbuf_cstr(&unsupported), "rope_scaling.rope_type is \"linear\"");
    CHECK_EQ_INT(p.count, 0);
    /* Without layer_types, transformers' default alternation applies. */
    CHECK_EQ_INT(c.layer_types[0], LLMR_GPT_OSS_SLIDING_ATTENTION);
    CHECK_EQ_INT(c.layer_types[1], LLMR_GPT_OSS_FULL_ATTENTION);
    llmr_strbuf_free(&unsupported);
    llmr_problems_free(&p);
    json_decref(cfg);
}

int main(void)
{
    RUN(presets_parse_and_imply_the_tensor_list);
    RUN(config_rules_reject_inconsistent_values);
    return llmr_test_finish();
}
