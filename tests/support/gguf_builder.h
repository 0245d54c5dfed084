/* Builds GGUF files byte by byte for tests: metadata, tensor infos, padding and a
 * zero data section, with knobs to break each rule on purpose. */
#ifndef LLMR_TESTS_GGUF_BUILDER_H
#define LLMR_TESTS_GGUF_BUILDER_H

#include <stddef.h>
#include <stdint.h>

#include "common/strbuf.h"

typedef struct gguf_builder {
    llmr_strbuf kvs;     /* encoded key/values */
    llmr_strbuf infos;   /* encoded tensor infos */
    uint64_t n_kvs, n_tensors;
    uint32_t version;    /* 3 unless a test changes it */
    uint64_t alignment;  /* 32 unless general.alignment is added */
    int64_t claim_kvs, claim_tensors; /* when >= 0, the counts written instead of the real ones */
} gguf_builder;

void gb_init(gguf_builder *b);
void gb_free(gguf_builder *b);
void gb_kv_string(gguf_builder *b, const char *key, const char *value);
void gb_kv_u32(gguf_builder *b, const char *key, uint32_t value);
void gb_kv_f32(gguf_builder *b, const char *key, float value);
void gb_kv_bool(gguf_builder *b, const char *key, uint8_t value);
void gb_kv_string_array(gguf_builder *b, const char *key, size_t n, const char *const *values);
void gb_kv_i32_array(gguf_builder *b, const char *key, size_t n);
void gb_tensor(gguf_builder *b, const char *name, uint32_t n_dims, const uint64_t *dims,
               uint32_t type, uint64_t offset);
/* The whole file: header, padding to the alignment, then data_bytes zeros.  malloc'd. */
uint8_t *gb_finish(gguf_builder *b, uint64_t data_bytes, size_t *len);
void gb_write(gguf_builder *b, const char *dir, const char *name, uint64_t data_bytes);
/* A valid one-tensor model of architecture `arch`. */
void gb_write_simple(const char *dir, const char *name, const char *arch);

#endif
