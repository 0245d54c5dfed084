/* Random bytes from the kernel (getrandom, else /dev/urandom), for ids, API keys and
 * salts.  There is no weaker fallback: without either, the call fails. */
#ifndef LLMR_COMMON_RANDOM_H
#define LLMR_COMMON_RANDOM_H

#include <stdbool.h>
#include <stddef.h>

/* Fills buf with n random bytes; false when the kernel gives none. */
bool llmr_random_bytes(unsigned char *buf, size_t n);

#endif
