/* safetensors reader: the 8-byte header length, the JSON header, and the data.
 *
 * Everything in a header is checked before anything is trusted: the header size,
 * the number of tensors, each shape's rank, the dtype, that dtype x shape is exactly
 * the byte range the offsets give (overflow-checked), and that the ranges tile the
 * data section from its first byte to the last byte of the file with no gap and no
 * overlap (the rule of the reference implementation).  A file that breaks a rule
 * gets problems that name the file and the tensor; a truncated download is named
 * as such, with how many bytes are missing.
 *
 * Opening a file reads only its header; llmr_st_file_map maps the data (mmap,
 * read-only, shared) without reading it. */
#ifndef LLMR_STORAGE_SAFETENSORS_H
#define LLMR_STORAGE_SAFETENSORS_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/problems.h"
#include "common/strmap.h"
#include "storage/dtype.h"

#define LLMR_ST_MAX_HEADER_BYTES (100u * 1000u * 1000u) /* as the reference reader */
#define LLMR_ST_MAX_TENSORS (1u << 20)
#define LLMR_ST_MAX_RANK 8u
#define LLMR_ST_MAX_NAME_BYTES 1024u

typedef struct llmr_st_tensor {
    char *name;
    llmr_dtype dtype;
    uint32_t rank;
    uint64_t shape[LLMR_ST_MAX_RANK];
    uint64_t begin; /* byte offsets within the data section (after the header) */
    uint64_t end;
} llmr_st_tensor;

typedef struct llmr_st_header {
    llmr_st_tensor *tensors; /* sorted by data offset */
    size_t count;
    json_t *metadata;        /* the __metadata__ object (string values), or NULL */
    uint64_t data_bytes;     /* size of the data section the tensors cover */
    llmr_strmap *by_name;    /* name -> index into tensors */
} llmr_st_header;

/* Parses and checks header text (the bytes after the 8-byte length).  data_size is
 * the number of bytes the file holds after the header.  `file` names the file in
 * problems.  Returns OK, or the code of the first problem added (MODEL_CORRUPT,
 * UNSUPPORTED for an unknown dtype, LIMIT_EXCEEDED, OOM_RAM); on failure `out` holds
 * nothing to free. */
llmr_status llmr_st_header_parse(const char *text, size_t len, uint64_t data_size,
                                 const char *file, llmr_st_header *out,
                                 llmr_problems *problems);
void llmr_st_header_free(llmr_st_header *header);
/* NULL when the header has no tensor of that name. */
const llmr_st_tensor *llmr_st_header_find(const llmr_st_header *header, const char *name);

/* Parses a whole safetensors file held in memory (len bytes). */
llmr_status llmr_st_parse_buffer(const uint8_t *buf, size_t len, const char *file,
                                 llmr_st_header *out, llmr_problems *problems);

typedef struct llmr_st_file {
    char *path;
    char *label;           /* the file's name within the model, for messages */
    int fd;
    uint64_t file_size;
    uint64_t data_offset;  /* 8 + header length */
    llmr_st_header header;
    const uint8_t *map;    /* the whole file once mapped, else NULL */
} llmr_st_file;

/* Opens `path` and reads and checks its header.  Problems name `label` (the file's
 * name within the model).  On failure nothing is left open. */
llmr_status llmr_st_file_open(const char *path, const char *label, llmr_st_file *file,
                              llmr_problems *problems);
/* Maps the file read-only.  Idempotent. */
llmr_status llmr_st_file_map(llmr_st_file *file, llmr_strbuf *err);
/* The tensor's bytes in the mapping; NULL before llmr_st_file_map. */
const uint8_t *llmr_st_file_tensor_data(const llmr_st_file *file, const llmr_st_tensor *t);
void llmr_st_file_close(llmr_st_file *file);

#endif
