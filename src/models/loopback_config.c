/* The loopback model's config.json: see loopback_config.h. */
#include "models/loopback_config.h"

#include "models/config_reader.h"

llmr_status llmr_loopback_config_parse(const json_t *root, const char *file,
                                       llmr_loopback_config *out, llmr_problems *problems)
{
    llmr_config_reader r;
    llmr_config_reader_init(&r, root, file, "llmr_loopback", problems);
    llmr_config_u64(&r, "vocab_size", 1, INT32_MAX, true, 0, &out->vocab_size);
    llmr_config_u64(&r, "max_position_embeddings", 2, INT32_MAX, false, 4096,
                    &out->max_position_embeddings);
    return r.ok ? LLMR_OK : LLMR_MODEL_CORRUPT;
}

json_t *llmr_loopback_config_to_json(const llmr_loopback_config *c)
{
    json_t *o = json_object();
    json_object_set_new(o, "vocab_size", json_integer((json_int_t)c->vocab_size));
    json_object_set_new(o, "max_position_embeddings",
                        json_integer((json_int_t)c->max_position_embeddings));
    return o;
}

void llmr_loopback_expected_tensors(const llmr_loopback_config *c, llmr_tensor_specs *specs)
{
    uint64_t shape[1] = {c->vocab_size};
    llmr_tensor_specs_add(specs, LLMR_DTYPE_RULE_EXACT, LLMR_DTYPE_I32, 1, shape, "%s",
                          LLMR_LOOPBACK_TABLE);
}
