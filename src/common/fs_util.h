/* File-system helpers shared by storage, tools and tests: joining paths, checking
 * names that come from outside, reading small files with a size limit, and writing
 * files atomically.  All return errors as values with a message in `err`. */
#ifndef LLMR_COMMON_FS_UTIL_H
#define LLMR_COMMON_FS_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/strbuf.h"
#include "llmr/status.h"

/* dir + "/" + name, malloc'd; NULL when out of memory. */
char *llmr_path_join(const char *dir, const char *name);

/* True when `name` is one plain path component a model may use for a file: 1 to 255
 * bytes of valid UTF-8, no '/', '\\' or control characters, not "." or "..".  Names
 * from an index, a manifest or a request must pass before they touch the disk. */
bool llmr_file_name_is_safe(const char *name);

/* True when `name` ends in `suffix` ("model.gguf", ".gguf"). */
bool llmr_name_has_suffix(const char *name, const char *suffix);

/* Reads a whole regular file of at most max_bytes.  On success *data is malloc'd,
 * NUL-terminated (not counted in *len).  Errors: NOT_FOUND, IO, LIMIT_EXCEEDED
 * (the message gives the size and the limit), INVALID_ARGUMENT (not a regular file). */
llmr_status llmr_read_file(const char *path, size_t max_bytes, char **data, size_t *len,
                           llmr_strbuf *err);

/* pread/pwrite of exactly n bytes at offset, retrying short transfers and EINTR.
 * False on error or end of file (errno tells which error). */
bool llmr_pread_all(int fd, void *buf, size_t n, uint64_t offset);
bool llmr_pwrite_all(int fd, const void *buf, size_t n, uint64_t offset);

/* Writes data to path through a temporary file in the same directory and a rename,
 * so readers see the old file or the new one, never a part. */
llmr_status llmr_write_file_atomic(const char *path, const void *data, size_t len,
                                   llmr_strbuf *err);
/* The same with the file's mode (0600 for a secret: the file never has another). */
llmr_status llmr_write_file_atomic_mode(const char *path, const void *data, size_t len, unsigned mode,
                                        llmr_strbuf *err);

/* Copies from_dir/name to to_dir/name (through llmr_write_file_atomic; files up to
 * 1 GiB).  err says which file and why. */
llmr_status llmr_copy_file(const char *from_dir, const char *to_dir, const char *name,
                           llmr_strbuf *err);

/* Whether dir/name is a regular file (following links). */
bool llmr_dir_has_file(const char *dir, const char *name);

/* Whether path is a directory with nothing in it, or does not exist. */
bool llmr_dir_is_empty_or_absent(const char *path);

/* Creates a directory and its parents (mode 0755); existing ones are fine. */
llmr_status llmr_mkdir_p(const char *path, llmr_strbuf *err);

#endif
