/* Writes safetensors files: the header (tensors laid out one after another in the
 * order given, padded with spaces to 8 bytes as the reference writer does) and the
 * data, which a callback fills or which is left as a hole: a sparse file of zeros
 * that takes no disk space and is written in no time.  Used by the synthetic
 * snapshot generator and by tests that build fixtures. */
#ifndef LLMR_STORAGE_ST_WRITER_H
#define LLMR_STORAGE_ST_WRITER_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "common/strbuf.h"
#include "llmr/status.h"
#include "storage/dtype.h"

typedef struct llmr_st_write_tensor {
    const char *name;
    llmr_dtype dtype;
    uint32_t rank;
    uint64_t shape[8];
} llmr_st_write_tensor;

/* Fills len bytes of tensor `index` starting at byte `offset` of that tensor. */
typedef llmr_status (*llmr_st_fill_fn)(void *ctx, size_t index, uint64_t offset, uint8_t *buf,
                                       size_t len);

/* Byte size of one tensor; false when dtype x shape overflows or is not whole bytes. */
bool llmr_st_tensor_bytes(const llmr_st_write_tensor *t, uint64_t *bytes);

/* Writes `path` atomically (temporary file, then rename).  metadata: an object of
 * strings for __metadata__, or NULL.  fill NULL: zeros, as a hole. */
llmr_status llmr_st_write_file(const char *path, const llmr_st_write_tensor *tensors, size_t n,
                               const json_t *metadata, llmr_st_fill_fn fill, void *ctx,
                               llmr_strbuf *err);

#endif
