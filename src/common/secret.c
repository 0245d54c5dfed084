/* Comparing secrets: see secret.h.  Both are hashed first (so that the comparison
 * runs over 32 bytes whatever their lengths), then every byte is compared. */
#include "common/secret.h"

#include <string.h>

#include "common/sha256.h"

bool llmr_secret_equal(const char *given, const char *want)
{
    if (!given || !want)
        return false;
    uint8_t a[32], b[32];
    llmr_sha256 c;
    llmr_sha256_init(&c);
    llmr_sha256_update(&c, given, strlen(given));
    llmr_sha256_final(&c, a);
    llmr_sha256_init(&c);
    llmr_sha256_update(&c, want, strlen(want));
    llmr_sha256_final(&c, b);
    volatile uint8_t diff = 0;
    for (size_t i = 0; i < 32; i++)
        diff |= (uint8_t)(a[i] ^ b[i]);
    return diff == 0;
}
