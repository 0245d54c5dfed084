/* The byte-level alphabet of GPT-2 style tokenizers: each of the 256 byte values is
 * shown as one printable character (printable Latin-1 bytes as themselves, the rest
 * as U+0100 onwards), so byte strings can be vocabulary entries. */
#ifndef LLMR_TOKENIZER_BYTE_LEVEL_H
#define LLMR_TOKENIZER_BYTE_LEVEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/strbuf.h"

/* The character that stands for byte b. */
uint32_t llmr_byte_level_char(uint8_t b);
/* The byte a character stands for, or -1 when it is not in the alphabet. */
int llmr_byte_level_byte(uint32_t cp);
/* Maps a string of alphabet characters back to bytes, appended to out.  False (out
 * unchanged) when a character is not in the alphabet. */
bool llmr_byte_level_decode(const char *text, size_t len, llmr_strbuf *out);

#endif
