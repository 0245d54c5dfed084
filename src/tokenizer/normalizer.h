/* tokenizer.json normalizers: NFC, NFD, NFKC, NFKD (utf8proc), Lowercase, Strip,
 * Prepend, Replace (a literal or a regex), and Sequence of these.  Any other type
 * fails at load with its name. */
#ifndef LLMR_TOKENIZER_NORMALIZER_H
#define LLMR_TOKENIZER_NORMALIZER_H

#include <jansson.h>
#include <stdbool.h>

#include "common/strbuf.h"
#include "llmr/status.h"

typedef struct llmr_normalizer llmr_normalizer;

/* Builds from the "normalizer" value; null gives *out = NULL (nothing to do).
 * UNSUPPORTED / MODEL_CORRUPT with the reason in err. */
llmr_status llmr_normalizer_build(const json_t *spec, llmr_normalizer **out, llmr_strbuf *err);
void llmr_normalizer_free(llmr_normalizer *n);

/* Normalizes UTF-8 text into out (reset first).  False only when a regex hit its
 * limits or memory ran out; err says which. */
bool llmr_normalizer_apply(const llmr_normalizer *n, const char *text, size_t len,
                           llmr_strbuf *out, llmr_strbuf *err);

#endif
