/* Unicode helpers for the tokenizer: UTF-8 decoding and encoding of code points,
 * and the character classes Hugging Face tokenizers uses (Rust's char methods and
 * regex classes), from utf8proc's Unicode data. */
#ifndef LLMR_TOKENIZER_UNICODE_H
#define LLMR_TOKENIZER_UNICODE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Decodes the code point at s (valid UTF-8, n > 0); *len gets its byte length. */
uint32_t llmr_uc_decode(const char *s, size_t n, size_t *len);
/* Encodes cp (a scalar value) into out; returns the byte count (1-4). */
size_t llmr_uc_encode(uint32_t cp, char out[4]);

/* Rust's char::is_whitespace: the Unicode White_Space property. */
bool llmr_uc_is_whitespace(uint32_t cp);
/* Rust's char::is_numeric: general categories Nd, Nl, No. */
bool llmr_uc_is_numeric(uint32_t cp);
/* A \w character of Rust's regex: Alphabetic, marks, Nd, Pc, Join_Control. */
bool llmr_uc_is_word(uint32_t cp);
/* Hugging Face's is_punctuation: ASCII punctuation or categories Pc Pd Pe Pf Pi Po Ps. */
bool llmr_uc_is_punctuation(uint32_t cp);
/* Rust's char::to_lowercase into out (up to 3 code points); returns the count. */
size_t llmr_uc_to_lower(uint32_t cp, uint32_t out[3]);

#endif
