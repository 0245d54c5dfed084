/* tokenizer.json pre-tokenizers: Split (literal or regex, every split behaviour,
 * invert), ByteLevel, Metaspace, Digits, Whitespace, WhitespaceSplit, Punctuation,
 * BertPreTokenizer, and Sequence of these, with the semantics of Hugging Face
 * tokenizers.  Any other type fails at load with its name.
 *
 * ByteLevel works in bytes: its mapping of bytes to printable characters is folded
 * into the BPE vocabulary at load (see bpe.h), so it must be the last step. */
#ifndef LLMR_TOKENIZER_PRETOKENIZER_H
#define LLMR_TOKENIZER_PRETOKENIZER_H

#include <jansson.h>
#include <stdbool.h>

#include "llmr/status.h"
#include "tokenizer/pieces.h"

typedef struct llmr_pretokenizer llmr_pretokenizer;

/* Builds from the "pre_tokenizer" value (null: *out = NULL).  *byte_level is set
 * when the pipeline ends with ByteLevel. */
llmr_status llmr_pretokenizer_build(const json_t *spec, llmr_pretokenizer **out, bool *byte_level,
                                    llmr_strbuf *err);
void llmr_pretokenizer_free(llmr_pretokenizer *p);

/* Splits the text pieces of *pieces (added tokens pass through).  `scratch` is a
 * second list the function may use; the result is left in *pieces. */
bool llmr_pretokenizer_apply(const llmr_pretokenizer *p, llmr_pieces *pieces,
                             llmr_pieces *scratch, llmr_strbuf *err);

#endif
