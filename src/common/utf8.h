/* UTF-8 validation (RFC 3629: no overlongs, no surrogates, nothing above U+10FFFF). */
#ifndef LLMR_COMMON_UTF8_H
#define LLMR_COMMON_UTF8_H

#include <stdbool.h>
#include <stddef.h>

/* Length of the well-formed character at s (1..4), or 0 when the bytes there do not
 * start one within n bytes. */
size_t llmr_utf8_char_len(const unsigned char *s, size_t n);

/* True when all n bytes are valid UTF-8.  Otherwise false, and *bad_offset (when not
 * NULL) is the offset of the first byte that does not start a valid character. */
bool llmr_utf8_valid(const char *s, size_t n, size_t *bad_offset);

/* Length of the maximal subpart of an ill-formed sequence at s (1 to 3 bytes): what
 * one U+FFFD replaces, as Unicode recommends and Rust's from_utf8_lossy does. */
size_t llmr_utf8_invalid_len(const unsigned char *s, size_t n);

#endif
