/* SHA-1 (FIPS 180-4), one shot: only to recognise a file by its git blob id (the
 * Hugging Face Hub names the small files of a repository by it, in its tree listing
 * and in its local cache).  Not for anything that must resist a forger: the files it
 * picks are also read whole and their size checked, and a weight file is known by its
 * SHA-256. */
#ifndef LLMR_COMMON_SHA1_H
#define LLMR_COMMON_SHA1_H

#include <stddef.h>
#include <stdint.h>

/* The SHA-1 of len bytes as 40 lowercase hex characters and a NUL. */
void llmr_sha1_hex(const void *data, size_t len, char out[41]);

/* git's blob id of the content: the SHA-1 of "blob LEN\0" followed by the bytes. */
void llmr_git_blob_id(const void *data, size_t len, char out[41]);

#endif
