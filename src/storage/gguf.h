/* GGUF header reader (versions 2 and 3, little-endian): magic, version, counts,
 * key/value metadata and tensor descriptions, with the same hard limits as the
 * safetensors reader: counts capped, every length checked against the bytes left,
 * tensor types known, sizes overflow-checked, offsets aligned, ranges inside the
 * file and not overlapping, and `general.architecture` present.
 *
 * The parser works on the whole file in memory (a read-only mapping): only the
 * header's pages are touched, so it costs the same for 1 GB and 100 GB.  Array
 * values (tokenizer vocabularies) are bounds-checked and skipped; their type and
 * count are kept. */
#ifndef LLMR_STORAGE_GGUF_H
#define LLMR_STORAGE_GGUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/problems.h"

#define LLMR_GGUF_MAX_TENSORS (1u << 20)
#define LLMR_GGUF_MAX_KVS (1u << 20)
#define LLMR_GGUF_MAX_STRING_BYTES (16u << 20)
#define LLMR_GGUF_MAX_KEY_BYTES 1024u
#define LLMR_GGUF_MAX_DIMS 4u
#define LLMR_GGUF_MAX_NAME_BYTES 63u /* llama.cpp's GGML_MAX_NAME, less the NUL */
#define LLMR_GGUF_DEFAULT_ALIGNMENT 32u

/* GGUF value types, as numbered by the format. */
typedef enum llmr_gguf_value_type {
    LLMR_GGUF_UINT8 = 0,
    LLMR_GGUF_INT8 = 1,
    LLMR_GGUF_UINT16 = 2,
    LLMR_GGUF_INT16 = 3,
    LLMR_GGUF_UINT32 = 4,
    LLMR_GGUF_INT32 = 5,
    LLMR_GGUF_FLOAT32 = 6,
    LLMR_GGUF_BOOL = 7,
    LLMR_GGUF_STRING = 8,
    LLMR_GGUF_ARRAY = 9,
    LLMR_GGUF_UINT64 = 10,
    LLMR_GGUF_INT64 = 11,
    LLMR_GGUF_FLOAT64 = 12,
    LLMR_GGUF_VALUE_TYPE_COUNT
} llmr_gguf_value_type;

typedef struct llmr_gguf_kv {
    char *key;
    llmr_gguf_value_type type;
    llmr_gguf_value_type array_type; /* when type is ARRAY */
    uint64_t array_count;            /* when type is ARRAY */
    union {
        uint64_t u64; /* unsigned integers */
        int64_t i64;  /* signed integers */
        double f64;   /* FLOAT32, FLOAT64 */
        bool b;
    } num;
    char *str;     /* STRING values, NUL-terminated (may hold invalid UTF-8) */
    size_t str_len;
} llmr_gguf_kv;

typedef struct llmr_gguf_tensor {
    char *name;
    uint32_t n_dims;
    uint64_t dims[LLMR_GGUF_MAX_DIMS];
    uint32_t type;   /* ggml type id */
    uint64_t offset; /* within the data section */
    uint64_t bytes;
} llmr_gguf_tensor;

typedef struct llmr_gguf_header {
    uint32_t version;
    llmr_gguf_kv *kvs;
    size_t kv_count;
    llmr_gguf_tensor *tensors;
    size_t tensor_count;
    uint64_t alignment;
    uint64_t data_offset;  /* where the data section starts in the file */
    uint64_t data_bytes;   /* end of the last tensor within the data section */
    const char *architecture; /* general.architecture (points into kvs) */
} llmr_gguf_header;

/* Parses the header of a GGUF file held in buf (len = the whole file).  Returns OK
 * or the code of the first problem (MODEL_CORRUPT, UNSUPPORTED, LIMIT_EXCEEDED,
 * OOM_RAM); on failure `out` holds nothing to free. */
llmr_status llmr_gguf_parse(const uint8_t *buf, size_t len, const char *file,
                            llmr_gguf_header *out, llmr_problems *problems);
void llmr_gguf_header_free(llmr_gguf_header *header);
const llmr_gguf_kv *llmr_gguf_find(const llmr_gguf_header *header, const char *key);
/* "Q4_K", "MXFP4"...; NULL for an id that is not a current ggml type. */
const char *llmr_ggml_type_name(uint32_t type);

typedef struct llmr_gguf_file {
    int fd;
    const uint8_t *map;
    uint64_t size;
    llmr_gguf_header header;
} llmr_gguf_file;

/* Maps `path` read-only and parses its header; problems name `label`. */
llmr_status llmr_gguf_file_open(const char *path, const char *label, llmr_gguf_file *file,
                                llmr_problems *problems);
void llmr_gguf_file_close(llmr_gguf_file *file);

#endif
