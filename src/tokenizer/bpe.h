/* The BPE model of Hugging Face tokenizers: a word (one pre-tokenized piece) becomes
 * token ids by starting from its characters and applying merges in rank order, the
 * lowest rank first and the leftmost first among equals, exactly as
 * tokenizers' Word::merge_all does.  Supports ignore_merges (a word that is itself in
 * the vocabulary is one token), byte_fallback (<0xXX> tokens for characters not in
 * the vocabulary), unk_token with fuse_unk, continuing_subword_prefix and
 * end_of_word_suffix.
 *
 * In byte mode (the pipeline has a ByteLevel pre-tokenizer) words are raw bytes and
 * the vocabulary's keys are the token strings mapped back through the byte-level
 * alphabet, so no text is converted per call; the result is the same as mapping the
 * text to the alphabet and looking up the original strings. */
#ifndef LLMR_TOKENIZER_BPE_H
#define LLMR_TOKENIZER_BPE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/strbuf.h"
#include "tokenizer/ids.h"
#include "tokenizer/token_map.h"

typedef struct llmr_bpe {
    bool byte_mode;
    bool ignore_merges;
    bool byte_fallback;
    bool fuse_unk;
    int64_t unk_id;              /* -1: no unk token */
    char *prefix;                /* continuing_subword_prefix, or NULL */
    size_t prefix_len;
    char *suffix;                /* end_of_word_suffix, or NULL */
    size_t suffix_len;
    const llmr_token_map *surface; /* token string -> id (owned by the tokenizer) */
    llmr_token_map bytes;        /* byte mode: raw bytes -> id */
    llmr_merge_map merges;
    /* Merges of two ids below 256 (the single bytes of byte-level vocabularies), as
     * a dense table that stays in cache: (rank << 32 | merged), or UINT64_MAX. */
    uint64_t *low_pairs;
    int64_t fallback[256];       /* id of "<0xXX>", or -1 */
    /* Byte mode: each raw byte's own token, else its byte-fallback tokens. */
    int64_t byte_token[256];
    int64_t byte_fallback_tokens[256][2];
    uint8_t byte_fallback_count[256];
} llmr_bpe;

/* Appends the ids of `word` to out.  False only when out of memory. */
bool llmr_bpe_tokenize(const llmr_bpe *bpe, const char *word, size_t len, llmr_ids *out);

void llmr_bpe_free(llmr_bpe *bpe);

/* Fills low_pairs from merges; false when out of memory. */
bool llmr_bpe_index_low_pairs(llmr_bpe *bpe);

#endif
