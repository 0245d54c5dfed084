/* Added tokens (special or not) and how they are found in text: leftmost, longest
 * match first; single_word tokens only between non-word characters; lstrip/rstrip
 * tokens take the whitespace beside them; normalized tokens are matched in the
 * normalized text, the others in the raw text (Hugging Face's AddedVocabulary). */
#ifndef LLMR_TOKENIZER_ADDED_TOKENS_H
#define LLMR_TOKENIZER_ADDED_TOKENS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/text_spans.h"
#include "tokenizer/pieces.h"

typedef struct llmr_added_token {
    char *content;    /* as written in tokenizer.json */
    size_t len;
    char *match;      /* what is searched for: content, or its normalized form */
    size_t match_len;
    uint32_t id;
    bool special, single_word, lstrip, rstrip, normalized;
} llmr_added_token;

typedef struct llmr_added_tokens {
    llmr_added_token *v;
    size_t n;
    /* Per first byte, indexes of tokens to try, longest first. */
    uint32_t *by_byte[256];
    uint32_t by_byte_n[256];
} llmr_added_tokens;

void llmr_added_tokens_free(llmr_added_tokens *a);
/* Builds the per-byte lookup; call after every token's `match` is set. */
bool llmr_added_tokens_index(llmr_added_tokens *a);

/* Splits each text piece of `in` on the tokens whose `normalized` flag equals
 * `normalized` (skipping special ones unless parse_special), appending to out.
 * plain (may be NULL): byte ranges of the pieces' arena where no special token is
 * recognised (a match that shares a byte with one is skipped); the text pieces that
 * hold such bytes come out marked plain, and a piece marked plain is split on
 * non-special tokens only. */
void llmr_added_tokens_split(const llmr_added_tokens *a, bool normalized, bool parse_special,
                             const llmr_text_spans *plain, const llmr_pieces *in, llmr_pieces *out);

#endif
