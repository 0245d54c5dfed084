/* tokenizer.json post-processors, applied when special tokens are added to an
 * encoding: TemplateProcessing (the "single" template), BertProcessing,
 * RobertaProcessing, ByteLevel (nothing to do for ids) and Sequence.  Any other
 * type fails at load. */
#ifndef LLMR_TOKENIZER_POSTPROCESSOR_H
#define LLMR_TOKENIZER_POSTPROCESSOR_H

#include <jansson.h>
#include <stdbool.h>

#include "common/strbuf.h"
#include "llmr/status.h"
#include "tokenizer/ids.h"

typedef struct llmr_postprocessor llmr_postprocessor;

llmr_status llmr_postprocessor_build(const json_t *spec, llmr_postprocessor **out,
                                     llmr_strbuf *err);
void llmr_postprocessor_free(llmr_postprocessor *p);
/* Rewrites ids with the special tokens added.  False when out of memory. */
bool llmr_postprocessor_apply(const llmr_postprocessor *p, llmr_ids *ids);

#endif
