/* A fast path for the pre-tokenizer regex of o200k-family tokenizers (gpt-oss,
 * GPT-4o):
 *
 *   [^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|...)?
 *   |[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|...)?
 *   |\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+
 *
 * For a match that begins and stays in ASCII text it works the alternatives out
 * directly, as the backtracking engine would; whenever a character outside ASCII
 * could change the outcome it declines, and the caller asks PCRE2.  The result is
 * therefore always PCRE2's; tests compare the two on random text. */
#ifndef LLMR_TOKENIZER_O200K_SPLIT_H
#define LLMR_TOKENIZER_O200K_SPLIT_H

#include <stdbool.h>
#include <stddef.h>

/* The exact pattern string (as in tokenizer.json) this fast path implements. */
extern const char llmr_o200k_pattern[];

/* The match that starts at p: true with *end set, or false when the caller must
 * ask the regex engine.  p < len. */
bool llmr_o200k_match_ascii(const char *text, size_t len, size_t p, size_t *end);

#endif
