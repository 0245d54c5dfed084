/* SHA-256 (FIPS 180-4), incremental: the node checks every file it fetches against
 * the manifest's digest as the bytes arrive. */
#ifndef LLMR_COMMON_SHA256_H
#define LLMR_COMMON_SHA256_H

#include <stddef.h>
#include <stdint.h>

typedef struct llmr_sha256 {
    uint32_t h[8];
    uint64_t total;       /* bytes hashed so far */
    uint8_t block[64];
    size_t used;          /* bytes waiting in block */
} llmr_sha256;

void llmr_sha256_init(llmr_sha256 *c);
void llmr_sha256_update(llmr_sha256 *c, const void *data, size_t len);
void llmr_sha256_final(llmr_sha256 *c, uint8_t out[32]);
/* The digest as 64 lowercase hex characters and a NUL. */
void llmr_sha256_hex(const uint8_t digest[32], char out[65]);
/* The SHA-256 of a whole file (hex), or -1 with errno set. */
int llmr_sha256_file(const char *path, char out[65]);
/* The same for what an open file holds from where it is read to its end. */
int llmr_sha256_fd(int fd, char out[65]);

#endif
