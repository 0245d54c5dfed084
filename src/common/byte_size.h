/* Byte sizes as people write them ("20GiB", "16G", "512MB", "1048576") and lists of
 * NAME=SIZE pairs ("gpt-oss-cuda=60GiB,llama-cpp=12GiB"), for settings such as the
 * per-plugin GPU memory budgets. */
#ifndef LLMR_COMMON_BYTE_SIZE_H
#define LLMR_COMMON_BYTE_SIZE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/strbuf.h"
#include "llmr/status.h"

/* A whole number with an optional unit: B, K/KB, M/MB, G/GB, T/TB (powers of 1000)
 * or KiB, MiB, GiB, TiB (powers of 1024).  False on anything else or overflow. */
bool llmr_byte_size_parse(const char *text, size_t len, uint64_t *out);

/* Calls fn for each NAME=SIZE of a comma-separated list (an empty list is fine).
 * INVALID_ARGUMENT with the bad item named in err; fn's own failure is returned. */
typedef llmr_status (*llmr_byte_size_item_fn)(void *ctx, const char *name, size_t name_len,
                                              uint64_t bytes);
llmr_status llmr_byte_size_list_parse(const char *text, llmr_byte_size_item_fn fn, void *ctx,
                                      llmr_strbuf *err);

#endif
