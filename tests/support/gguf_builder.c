/* GGUF test builder: see gguf_builder.h. */
#include "gguf_builder.h"

#include <stdlib.h>
#include <string.h>

#include "fixture.h"

static void put_le(llmr_strbuf *s, uint64_t v, int n)
{
    for (int i = 0; i < n; i++)
        llmr_strbuf_putc(s, (char)(v >> (8 * i)));
}

static void put_str(llmr_strbuf *s, const char *str)
{
    put_le(s, strlen(str), 8);
    llmr_strbuf_puts(s, str);
}

void gb_init(gguf_builder *b)
{
    memset(b, 0, sizeof *b);
    b->version = 3;
    b->alignment = 32;
    b->claim_kvs = b->claim_tensors = -1;
}

void gb_free(gguf_builder *b)
{
    llmr_strbuf_free(&b->kvs);
    llmr_strbuf_free(&b->infos);
}

void gb_kv_string(gguf_builder *b, const char *key, const char *value)
{
    put_str(&b->kvs, key);
    put_le(&b->kvs, 8, 4);
    put_str(&b->kvs, value);
    b->n_kvs++;
}

void gb_kv_u32(gguf_builder *b, const char *key, uint32_t value)
{
    put_str(&b->kvs, key);
    put_le(&b->kvs, 4, 4);
    put_le(&b->kvs, value, 4);
    b->n_kvs++;
    if (strcmp(key, "general.alignment") == 0)
        b->alignment = value;
}

void gb_kv_f32(gguf_builder *b, const char *key, float value)
{
    uint32_t bits;
    memcpy(&bits, &value, 4);
    put_str(&b->kvs, key);
    put_le(&b->kvs, 6, 4);
    put_le(&b->kvs, bits, 4);
    b->n_kvs++;
}

void gb_kv_bool(gguf_builder *b, const char *key, uint8_t value)
{
    put_str(&b->kvs, key);
    put_le(&b->kvs, 7, 4);
    put_le(&b->kvs, value, 1);
    b->n_kvs++;
}

void gb_kv_string_array(gguf_builder *b, const char *key, size_t n, const char *const *values)
{
    put_str(&b->kvs, key);
    put_le(&b->kvs, 9, 4);
    put_le(&b->kvs, 8, 4);
    put_le(&b->kvs, n, 8);
    for (size_t i = 0; i < n; i++)
        put_str(&b->kvs, values[i]);
    b->n_kvs++;
}

void gb_kv_i32_array(gguf_builder *b, const char *key, size_t n)
{
    put_str(&b->kvs, key);
    put_le(&b->kvs, 9, 4);
    put_le(&b->kvs, 5, 4);
    put_le(&b->kvs, n, 8);
    for (size_t i = 0; i < n; i++)
        put_le(&b->kvs, i, 4);
    b->n_kvs++;
}

void gb_tensor(gguf_builder *b, const char *name, uint32_t n_dims, const uint64_t *dims,
               uint32_t type, uint64_t offset)
{
    put_str(&b->infos, name);
    put_le(&b->infos, n_dims, 4);
    for (uint32_t i = 0; i < n_dims; i++)
        put_le(&b->infos, dims[i], 8);
    put_le(&b->infos, type, 4);
    put_le(&b->infos, offset, 8);
    b->n_tensors++;
}

uint8_t *gb_finish(gguf_builder *b, uint64_t data_bytes, size_t *len)
{
    llmr_strbuf out = LLMR_STRBUF_INIT;
    llmr_strbuf_puts(&out, "GGUF");
    put_le(&out, b->version, 4);
    put_le(&out, b->claim_tensors >= 0 ? (uint64_t)b->claim_tensors : b->n_tensors, 8);
    put_le(&out, b->claim_kvs >= 0 ? (uint64_t)b->claim_kvs : b->n_kvs, 8);
    llmr_strbuf_append(&out, b->kvs.data, b->kvs.len);
    llmr_strbuf_append(&out, b->infos.data, b->infos.len);
    while (out.len % b->alignment)
        llmr_strbuf_putc(&out, 0);
    for (uint64_t i = 0; i < data_bytes; i++)
        llmr_strbuf_putc(&out, 0);
    *len = out.len;
    return (uint8_t *)llmr_strbuf_take(&out);
}

void gb_write(gguf_builder *b, const char *dir, const char *name, uint64_t data_bytes)
{
    size_t len;
    uint8_t *bytes = gb_finish(b, data_bytes, &len);
    fx_write(dir, name, bytes, len);
    free(bytes);
}

void gb_write_simple(const char *dir, const char *name, const char *arch)
{
    gguf_builder b;
    gb_init(&b);
    gb_kv_string(&b, "general.architecture", arch);
    gb_kv_string(&b, "general.name", "tiny test model");
    char key[128];
    snprintf(key, sizeof key, "%s.context_length", arch);
    gb_kv_u32(&b, key, 4096);
    gb_tensor(&b, "token_embd.weight", 2, (uint64_t[]){64, 10}, 0 /* F32 */, 0);
    gb_write(&b, dir, name, 64 * 10 * 4);
    gb_free(&b);
}
