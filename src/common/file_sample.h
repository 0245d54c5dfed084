/* The sampled digest of a file: a check of a large file that reads about 1 MiB whatever
 * its size, for what must be quick (registering a local model directory, using its
 * files in place on a node, a load).  It catches a file cut short, grown, or replaced by
 * another; a change inside the file between the pieces it reads only a full SHA-256
 * finds.  The manifest carries it as "sample_sha256" (docs/node-router-protocol.md).
 *
 * Definition (version 1): SHA-256 over the file's size as 8 little-endian bytes, then
 * LLMR_SAMPLE_PIECES pieces of LLMR_SAMPLE_PIECE_BYTES at the offsets
 * i * (size - piece) / (pieces - 1) for i = 0 .. pieces - 1 (integer division), in
 * that order; a file no larger than the pieces together is hashed whole after its size.
 * Changing any of this changes every digest: give it a new name then. */
#ifndef LLMR_COMMON_FILE_SAMPLE_H
#define LLMR_COMMON_FILE_SAMPLE_H

#include <stdint.h>

#define LLMR_SAMPLE_PIECES 16u
#define LLMR_SAMPLE_PIECE_BYTES (64u * 1024u)

/* The sampled digest (64 lowercase hex characters and a NUL) of the size bytes the open
 * file fd holds: 0, or -1 with errno set (EIO also when the file is shorter than size). */
int llmr_file_sample_sha256_fd(int fd, uint64_t size, char hex[65]);

/* The same for a path opened without following a symlink at its last component; *size
 * gets the file's size.  -1 with errno set: it cannot be read, or is not a regular file
 * (EINVAL). */
int llmr_file_sample_sha256(const char *path, uint64_t *size, char hex[65]);

#endif
