/* A Hugging Face tokenizer.json in C: load, encode (text -> ids), decode (ids ->
 * text), exactly as the tokenizers library does for the components it supports:
 *
 *   model          BPE (ignore_merges, byte_fallback, unk_token/fuse_unk,
 *                  continuing_subword_prefix, end_of_word_suffix, merges as "a b"
 *                  strings or ["a", "b"] pairs)
 *   normalizer     NFC NFD NFKC NFKD Lowercase Strip Prepend Replace Sequence
 *   pre_tokenizer  Split ByteLevel Metaspace Digits Whitespace WhitespaceSplit
 *                  Punctuation BertPreTokenizer Sequence
 *   post_processor TemplateProcessing BertProcessing RobertaProcessing ByteLevel Sequence
 *   decoder        ByteLevel Metaspace ByteFallback Fuse Strip Replace Sequence
 *   added_tokens   with lstrip, rstrip, single_word, normalized, special
 *
 * Anything else fails at load with the component named.  `truncation` and
 * `padding` are ignored (they shape batches, not single encodings).
 *
 * A loaded tokenizer is immutable: encode and decode may run on many threads at
 * once.  Loading reads the file with a streaming JSON reader; the 27.8 MB gpt-oss
 * tokenizer.json loads in a fraction of a second. */
#ifndef LLMR_TOKENIZER_TOKENIZER_H
#define LLMR_TOKENIZER_TOKENIZER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/strbuf.h"
#include "common/text_spans.h"
#include "llmr/status.h"
#include "tokenizer/ids.h"

#define LLMR_TOKENIZER_MAX_BYTES (1u << 30)
#define LLMR_TOKENIZER_MAX_ID ((1u << 24) - 1)

typedef struct llmr_tokenizer llmr_tokenizer;

/* Loads tokenizer.json from memory / from a file.  On failure *out is NULL and err
 * names the component or the JSON position: MODEL_CORRUPT (malformed),
 * UNSUPPORTED (a component llmr does not implement), LIMIT_EXCEEDED, OOM_RAM,
 * NOT_FOUND / IO (the file). */
llmr_status llmr_tokenizer_load(const char *json, size_t len, llmr_tokenizer **out,
                                llmr_strbuf *err);
llmr_status llmr_tokenizer_load_file(const char *path, llmr_tokenizer **out, llmr_strbuf *err);
void llmr_tokenizer_free(llmr_tokenizer *tok);

enum {
    LLMR_ENCODE_PARSE_SPECIAL = 1, /* recognise special added tokens in the text */
    LLMR_ENCODE_ADD_SPECIAL = 2    /* apply the post-processor (BOS/EOS...) */
};

/* Encodes UTF-8 text, appending ids to out.  Invalid UTF-8 is INVALID_ARGUMENT
 * with the byte offset in err; a regex that hits its limits is LIMIT_EXCEEDED. */
llmr_status llmr_tokenizer_encode(const llmr_tokenizer *tok, const char *text, size_t len,
                                  unsigned flags, llmr_ids *out, llmr_strbuf *err);

/* The same, with byte ranges of the text (sorted, apart; common/text_spans.h) in which
 * no special token is recognised even under LLMR_ENCODE_PARSE_SPECIAL: a special
 * token's text that shares a byte with one is tokenized as the ordinary text it is
 * (as with special recognition off), and the rest of the text as before.  A chat
 * prompt's request strings are such ranges (docs/tokenizer.md).  No spans: exactly
 * llmr_tokenizer_encode.  Spans out of order or past the end are INVALID_ARGUMENT. */
llmr_status llmr_tokenizer_encode_text(const llmr_tokenizer *tok, const char *text, size_t len,
                                       unsigned flags, const llmr_text_span *plain, size_t n_plain,
                                       llmr_ids *out, llmr_strbuf *err);

enum { LLMR_DECODE_SKIP_SPECIAL = 1 };

/* Decodes ids into text appended to out.  Ids that are not in the vocabulary are
 * skipped (as tokenizers does); *unknown (when not NULL) counts them. */
llmr_status llmr_tokenizer_decode(const llmr_tokenizer *tok, const uint32_t *ids, size_t n,
                                  unsigned flags, llmr_strbuf *out, size_t *unknown,
                                  llmr_strbuf *err);

/* One past the highest id of the vocabulary and added tokens. */
uint32_t llmr_tokenizer_vocab_size(const llmr_tokenizer *tok);
/* The id of a token string (vocabulary or added), or -1. */
int64_t llmr_tokenizer_token_to_id(const llmr_tokenizer *tok, const char *token, size_t len);
/* The token string of an id, or NULL (then *len is 0). */
const char *llmr_tokenizer_id_to_token(const llmr_tokenizer *tok, uint32_t id, size_t *len);
bool llmr_tokenizer_is_special(const llmr_tokenizer *tok, uint32_t id);
/* The added tokens marked special, in tokenizer.json's order: how many, and the text
 * of the i-th (NULL past the end). */
size_t llmr_tokenizer_special_count(const llmr_tokenizer *tok);
const char *llmr_tokenizer_special_text(const llmr_tokenizer *tok, size_t i, size_t *len);
/* Whether decoding goes through a ByteFallback step (decoder.h), which shows a whole
 * run of byte tokens as U+FFFD while the run's end is not UTF-8. */
bool llmr_tokenizer_decodes_byte_fallback(const llmr_tokenizer *tok);

#endif
