/* Test fixtures written by the tests themselves: temporary directories (removed at
 * exit), text files, safetensors files from a tensor list or from raw header text,
 * and model snapshots.  Nothing binary is checked into the repository. */
#ifndef LLMR_TESTS_FIXTURE_H
#define LLMR_TESTS_FIXTURE_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/problems.h"
#include "storage/st_writer.h"

/* A new empty directory under $TMPDIR (or /tmp); removed when the process exits. */
const char *fx_tmpdir(void);
/* dir/name in a static rotating buffer (valid for the next few calls). */
const char *fx_path(const char *dir, const char *name);
void fx_write(const char *dir, const char *name, const void *data, size_t len);
void fx_write_text(const char *dir, const char *name, const char *text);
void fx_write_json(const char *dir, const char *name, const json_t *value);
/* Reads a file of the source tree's tests/fixtures (LLMR_TEST_FIXTURES); malloc'd. */
char *fx_read_fixture(const char *relative, size_t *len);
/* The shared data directory (LLMR_SHARED_DIR) when it exists, else NULL. */
const char *fx_shared_dir(void);

/* A safetensors file from a tensor list, zeros as a hole. */
void fx_write_st(const char *dir, const char *name, const llmr_st_write_tensor *t, size_t n);
/* A safetensors file with the given header text verbatim and data_len zero bytes. */
void fx_write_st_raw(const char *dir, const char *name, const char *header, uint64_t data_len);
/* The tensors of a safetensors header JSON (as written by transformers), in data order.
 * Names point into `header`, which must outlive the result.  Returns the count. */
size_t fx_tensors_of_header(const json_t *header, llmr_st_write_tensor **out);

/* A complete gpt-oss-tiny snapshot (synthetic shards, a stand-in tokenizer.json).
 * max_shard_bytes 0: one shard. */
void fx_gpt_oss_tiny(const char *dir);
void fx_gpt_oss_tiny_sharded(const char *dir, uint64_t max_shard_bytes);

/* Opens dir with the given format ("auto", "safetensors", "gguf"); returns the status
 * and leaves the problems in *p (initialised here; free them). */
llmr_status fx_open(const char *dir, const char *format, llmr_problems *p);

#endif
