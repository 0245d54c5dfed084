/* Loopback model writer: see loopback_model.h. */
#include "models/loopback_model.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "common/fs_util.h"
#include "models/loopback_config.h"
#include "storage/st_writer.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/unicode.h"

void llmr_loopback_model_options_default(llmr_loopback_model_options *o)
{
    memset(o, 0, sizeof *o);
    o->vocab_size = 512;
    o->context_length = 4096;
}

int32_t llmr_loopback_model_next(const llmr_loopback_model_options *o, int32_t prev)
{
    /* Any fixed map will do; this one wanders over the whole vocabulary except the
     * end token, so a generation runs until max_tokens unless asked to stop. */
    uint64_t v = o->vocab_size - 1;
    uint64_t x = ((uint64_t)(uint32_t)prev * 2654435761u + o->seed * 40503u + 17u) % v;
    return (int32_t)x;
}

static llmr_status fill_table(void *ctx, size_t index, uint64_t offset, uint8_t *buf, size_t len)
{
    const llmr_loopback_model_options *o = ctx;
    (void)index;
    for (size_t i = 0; i < len; i++) {
        uint64_t byte = offset + i;
        int32_t v = llmr_loopback_model_next(o, (int32_t)(byte / 4));
        buf[i] = (uint8_t)((uint32_t)v >> (8 * (byte % 4))); /* little endian */
    }
    return LLMR_OK;
}

static void put_utf8(llmr_strbuf *sb, uint32_t cp)
{
    char b[4];
    llmr_strbuf_append(sb, b, llmr_uc_encode(cp, b));
}

/* The byte-level string of token `id` (not the end token). */
static json_t *token_string(uint32_t id)
{
    llmr_strbuf sb = LLMR_STRBUF_INIT;
    if (id < 256) {
        put_utf8(&sb, llmr_byte_level_char((uint8_t)id));
    } else {
        uint32_t k = id - 256; /* pairs of the 95 printable ASCII characters */
        put_utf8(&sb, llmr_byte_level_char((uint8_t)(' ' + (k / 95) % 95)));
        put_utf8(&sb, llmr_byte_level_char((uint8_t)(' ' + k % 95)));
    }
    json_t *s = json_stringn(sb.data ? sb.data : "", sb.len);
    llmr_strbuf_free(&sb);
    return s;
}

static json_t *tokenizer_json(uint32_t vocab_size)
{
    json_t *vocab = json_object();
    uint32_t end_id = vocab_size - 1;
    for (uint32_t id = 0; id < end_id; id++) {
        json_t *s = token_string(id);
        /* Pairs repeat once the 95 x 95 combinations run out; later ids then have
         * no string of their own, which decoding treats as unknown (skipped). */
        if (!json_object_get(vocab, json_string_value(s)))
            json_object_set_new(vocab, json_string_value(s), json_integer(id));
        json_decref(s);
    }
    json_t *root = json_pack(
        "{s:s, s:[{s:i, s:s, s:b, s:b, s:b, s:b, s:b}], s:{s:s, s:b, s:b, s:b}, "
        "s:{s:s, s:b, s:b, s:b}, s:{s:s, s:o, s:[]}}",
        "version", "1.0", "added_tokens", "id", (int)end_id, "content", LLMR_LOOPBACK_END_TOKEN,
        "single_word", 0, "lstrip", 0, "rstrip", 0, "normalized", 0, "special", 1,
        "pre_tokenizer", "type", "ByteLevel", "add_prefix_space", 0, "trim_offsets", 1,
        "use_regex", 1, "decoder", "type", "ByteLevel", "add_prefix_space", 0, "trim_offsets", 1,
        "use_regex", 1, "model", "type", "BPE", "vocab", vocab, "merges");
    return root;
}

static json_t *ids_json(const uint32_t *ids, size_t n)
{
    json_t *a = json_array();
    for (size_t i = 0; a && i < n; i++)
        json_array_append_new(a, json_integer(ids[i]));
    return a;
}

/* config.json's "llmr_loopback" object of the echo mode (models/loopback_config.h). */
static json_t *echo_json(const llmr_loopback_echo *e)
{
    return json_pack("{s:s, s:o, s:i, s:i, s:o}", "mode", "echo_last_user", "user_header",
                     ids_json(e->user_header, e->user_header_len), "end_id", (int)e->end_id,
                     "return_id", (int)e->return_id, "turn_end_ids",
                     ids_json(e->turn_end_ids, e->turn_end_len));
}

static llmr_status write_json(const char *dir, const char *name, json_t *value, llmr_strbuf *err)
{
    char *path = llmr_path_join(dir, name);
    char *text = value ? json_dumps(value, JSON_COMPACT) : NULL;
    llmr_status st = LLMR_OOM_RAM;
    if (path && text)
        st = llmr_write_file_atomic(path, text, strlen(text), err);
    else
        llmr_strbuf_printf(err, "out of memory writing %s", name);
    free(text);
    free(path);
    json_decref(value);
    return st;
}

llmr_status llmr_loopback_model_write(const char *dir, const llmr_loopback_model_options *o,
                                      llmr_strbuf *err)
{
    if (o->vocab_size < 257 || o->vocab_size > INT32_MAX || o->context_length < 2) {
        llmr_strbuf_printf(err, "a loopback model needs a vocabulary of at least 257 tokens "
                                "and a context of at least 2 (got %u and %u)",
                           o->vocab_size, o->context_length);
        return LLMR_INVALID_ARGUMENT;
    }
    llmr_status st = llmr_mkdir_p(dir, err);
    if (st != LLMR_OK)
        return st;
    json_t *config = json_pack("{s:s, s:[s], s:i, s:i, s:i}", "model_type",
                               LLMR_LOOPBACK_MODEL_TYPE, "architectures",
                               LLMR_LOOPBACK_ARCHITECTURE, "vocab_size", (int)o->vocab_size,
                               "max_position_embeddings", (int)o->context_length,
                               "eos_token_id",
                               (int)(o->echo ? o->echo->return_id : o->vocab_size - 1));
    if (config && o->echo && json_object_set_new(config, "llmr_loopback", echo_json(o->echo)) != 0) {
        json_decref(config);
        config = NULL;
    }
    if (config && o->special_tokens_in_content &&
        json_object_set_new(config, "special_tokens_in_content", json_true()) != 0) {
        json_decref(config);
        config = NULL;
    }
    st = write_json(dir, "config.json", config, err);
    if (st == LLMR_OK && !o->no_tokenizer)
        st = write_json(dir, "tokenizer.json", tokenizer_json(o->vocab_size), err);
    if (st == LLMR_OK) {
        llmr_st_write_tensor t = {LLMR_LOOPBACK_TABLE, LLMR_DTYPE_I32, 1, {o->vocab_size}};
        char *path = llmr_path_join(dir, "model.safetensors");
        st = path ? llmr_st_write_file(path, &t, 1, NULL, fill_table, (void *)o, err)
                  : LLMR_OOM_RAM;
        free(path);
    }
    return st;
}
