/* The loopback model's config.json: see loopback_config.h. */
#include "models/loopback_config.h"

#include <stdio.h>
#include <string.h>

#include "common/json_util.h"
#include "common/strbuf.h"
#include "models/config_reader.h"

#define SECTION "llmr_loopback"

/* An id of the vocabulary at section.key. */
static bool read_id(llmr_config_reader *r, const json_t *section, const char *key,
                    uint64_t vocab, uint32_t *out)
{
    uint64_t v = 0;
    if (!llmr_config_u64_in(r, section, SECTION, key, 0, vocab ? vocab - 1 : 0, true, 0, &v))
        return false;
    *out = (uint32_t)v;
    return true;
}

/* A list of 1 to LLMR_LOOPBACK_MAX_IDS ids of the vocabulary at section.key. */
static void read_ids(llmr_config_reader *r, const json_t *section, const char *key,
                     uint64_t vocab, uint32_t *out, size_t *len)
{
    char name[64];
    snprintf(name, sizeof name, SECTION ".%s", key);
    const json_t *a = json_object_get(section, key);
    *len = 0;
    if (!a || json_is_null(a)) {
        llmr_config_fail(r, LLMR_MODEL_CORRUPT, name, "is missing (mode echo_last_user needs it)");
        return;
    }
    if (!json_is_array(a) || json_array_size(a) == 0 ||
        json_array_size(a) > LLMR_LOOPBACK_MAX_IDS) {
        llmr_config_fail(r, LLMR_MODEL_CORRUPT, name, "must be an array of 1 to %d token ids",
                         LLMR_LOOPBACK_MAX_IDS);
        return;
    }
    size_t i;
    const json_t *v;
    json_array_foreach(a, i, v) {
        uint64_t id;
        if (!llmr_json_as_u64(v, &id) || id >= vocab) {
            llmr_config_fail(r, LLMR_MODEL_CORRUPT, name,
                             "[%zu] must be a token id from 0 to %llu", i,
                             (unsigned long long)(vocab ? vocab - 1 : 0));
            *len = 0;
            return;
        }
        out[i] = (uint32_t)id;
    }
    *len = json_array_size(a);
}

static void read_section(llmr_config_reader *r, const json_t *root, llmr_loopback_config *out)
{
    const json_t *s = json_object_get(root, SECTION);
    if (!s || json_is_null(s))
        return;
    if (!json_is_object(s)) {
        llmr_config_fail(r, LLMR_MODEL_CORRUPT, SECTION, "must be an object");
        return;
    }
    const json_t *mode = json_object_get(s, "mode");
    const char *m = json_string_value(mode);
    if (!mode || json_is_null(mode) || (m && strcmp(m, "next_token") == 0))
        return;
    if (!m || strcmp(m, "echo_last_user") != 0) {
        llmr_strbuf got = LLMR_STRBUF_INIT;
        llmr_json_describe(&got, mode);
        llmr_config_fail(r, LLMR_MODEL_CORRUPT, SECTION ".mode",
                         "must be \"next_token\" or \"echo_last_user\", got %s",
                         llmr_strbuf_cstr(&got));
        llmr_strbuf_free(&got);
        return;
    }
    out->mode = LLMR_LOOPBACK_ECHO_LAST_USER;
    llmr_loopback_echo *e = &out->echo;
    read_ids(r, s, "user_header", out->vocab_size, e->user_header, &e->user_header_len);
    read_id(r, s, "end_id", out->vocab_size, &e->end_id);
    read_id(r, s, "return_id", out->vocab_size, &e->return_id);
    read_ids(r, s, "turn_end_ids", out->vocab_size, e->turn_end_ids, &e->turn_end_len);
}

llmr_status llmr_loopback_config_parse(const json_t *root, const char *file,
                                       llmr_loopback_config *out, llmr_problems *problems)
{
    llmr_config_reader r;
    memset(out, 0, sizeof *out);
    llmr_config_reader_init(&r, root, file, "llmr_loopback", problems);
    llmr_config_u64(&r, "vocab_size", 1, INT32_MAX, true, 0, &out->vocab_size);
    llmr_config_u64(&r, "max_position_embeddings", 2, INT32_MAX, false, 4096,
                    &out->max_position_embeddings);
    if (r.ok)
        read_section(&r, root, out);
    return r.ok ? LLMR_OK : LLMR_MODEL_CORRUPT;
}

static json_t *ids_json(const uint32_t *ids, size_t n)
{
    json_t *a = json_array();
    for (size_t i = 0; a && i < n; i++)
        json_array_append_new(a, json_integer(ids[i]));
    return a;
}

json_t *llmr_loopback_config_to_json(const llmr_loopback_config *c)
{
    json_t *o = json_object();
    json_object_set_new(o, "vocab_size", json_integer((json_int_t)c->vocab_size));
    json_object_set_new(o, "max_position_embeddings",
                        json_integer((json_int_t)c->max_position_embeddings));
    if (c->mode == LLMR_LOOPBACK_ECHO_LAST_USER) {
        const llmr_loopback_echo *e = &c->echo;
        json_object_set_new(o, "mode", json_string("echo_last_user"));
        json_object_set_new(o, "echo_user_header", ids_json(e->user_header, e->user_header_len));
        json_object_set_new(o, "echo_end_id", json_integer(e->end_id));
        json_object_set_new(o, "echo_return_id", json_integer(e->return_id));
        json_object_set_new(o, "echo_turn_end_ids", ids_json(e->turn_end_ids, e->turn_end_len));
    }
    return o;
}

void llmr_loopback_expected_tensors(const llmr_loopback_config *c, llmr_tensor_specs *specs)
{
    uint64_t shape[1] = {c->vocab_size};
    llmr_tensor_specs_add(specs, LLMR_DTYPE_RULE_EXACT, LLMR_DTYPE_I32, 1, shape, "%s",
                          LLMR_LOOPBACK_TABLE);
}
