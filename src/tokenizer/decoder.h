/* tokenizer.json decoders: ByteLevel, Metaspace, ByteFallback, Fuse, Strip, Replace
 * and Sequence, with the semantics of Hugging Face tokenizers' decode_chain.  The
 * decoder turns the list of token strings into the text; without one, tokens are
 * joined with spaces (as tokenizers does).  Any other type fails at load. */
#ifndef LLMR_TOKENIZER_DECODER_H
#define LLMR_TOKENIZER_DECODER_H

#include <jansson.h>
#include <stdbool.h>

#include "common/strbuf.h"
#include "llmr/status.h"

typedef struct llmr_decoder llmr_decoder;

/* A list of token strings in one arena. */
typedef struct llmr_token_list {
    llmr_strbuf arena;
    struct llmr_token_span { size_t off, len; } *v;
    size_t n, cap;
    bool failed;
} llmr_token_list;

void llmr_token_list_init(llmr_token_list *l);
void llmr_token_list_free(llmr_token_list *l);
void llmr_token_list_clear(llmr_token_list *l);
void llmr_token_list_add(llmr_token_list *l, const char *s, size_t len);

llmr_status llmr_decoder_build(const json_t *spec, llmr_decoder **out, llmr_strbuf *err);
void llmr_decoder_free(llmr_decoder *d);
/* Whether a ByteFallback step is in the chain (d may be NULL: no decoder).  Such a
 * step turns a whole run of byte tokens into U+FFFD while its end is not UTF-8. */
bool llmr_decoder_has_byte_fallback(const llmr_decoder *d);

/* Decodes the tokens into text appended to out (d may be NULL: join with spaces). */
bool llmr_decoder_run(const llmr_decoder *d, llmr_token_list *tokens, llmr_strbuf *out,
                      llmr_strbuf *err);

#endif
