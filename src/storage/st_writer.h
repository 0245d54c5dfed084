/* Writes safetensors files: the header (tensors laid out one after another in the
 * order given, padded with spaces to 8 bytes as the reference writer does) and the
 * data, which a callback fills or which is left as a hole: a sparse file of zeros
 * that takes no disk space and is written in no time.  The data can be filled by
 * several threads at once, each filling and writing its own chunks at their
 * offsets.  Used by the synthetic snapshot generator and by tests that build
 * fixtures.  The caller owns every argument; nothing is kept after a call. */
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

/* Fills len bytes of tensor `index` starting at byte `offset` of that tensor.  A
 * status other than LLMR_OK stops the write, which then fails with that status. */
typedef llmr_status (*llmr_st_fill_fn)(void *ctx, size_t index, uint64_t offset, uint8_t *buf,
                                       size_t len);

/* Byte size of one tensor; false when dtype x shape overflows or is not whole bytes. */
bool llmr_st_tensor_bytes(const llmr_st_write_tensor *t, uint64_t *bytes);

/* Writes `path` atomically (temporary file, then rename).  metadata: an object of
 * strings for __metadata__, or NULL.  fill NULL: zeros, as a hole. */
llmr_status llmr_st_write_file(const char *path, const llmr_st_write_tensor *tensors, size_t n,
                               const json_t *metadata, llmr_st_fill_fn fill, void *ctx,
                               llmr_strbuf *err);

/* How llmr_st_write_file_parallel writes the data. */
typedef struct llmr_st_write_options {
    unsigned threads;   /* threads filling and writing; 0 or 1: the calling thread alone */
    size_t chunk_bytes; /* the most bytes of one fill call; 0: 4 MiB; rounded up to 8 */
    /* Called after each chunk is written, from any of the threads and possibly from
     * several at once: `done` of the file's `total` data bytes are written.  NULL:
     * none. */
    void (*progress)(void *ctx, uint64_t done, uint64_t total);
    void *progress_ctx;
} llmr_st_write_options;

/* llmr_st_write_file with the data filled by options->threads threads (options
 * NULL: one).  Each tensor's data is cut into chunks of chunk_bytes (the last one of
 * a tensor shorter; a chunk never spans two tensors) that the threads take in any
 * order, so `fill` is called from several threads at once and must give bytes that
 * depend on its arguments only.  The first failure stops every thread; the
 * temporary file is removed and err says which tensor or which write failed. */
llmr_status llmr_st_write_file_parallel(const char *path, const llmr_st_write_tensor *tensors,
                                        size_t n, const json_t *metadata, llmr_st_fill_fn fill,
                                        void *ctx, const llmr_st_write_options *options,
                                        llmr_strbuf *err);

#endif
