/* Stop strings: text that ends a generation, as OpenAI's `stop` parameter.  The
 * engine worker feeds the text of each token through a matcher; text that could be
 * the start of a stop string is held back until it is known not to be one, so a
 * client never sees part of a stop string, and the stop string itself is never
 * sent.  Engines only see stop token ids (include/llmr/engine.h). */
#ifndef LLMR_ENGINE_HOST_STOP_STRINGS_H
#define LLMR_ENGINE_HOST_STOP_STRINGS_H

#include <stdbool.h>
#include <stddef.h>

#include "common/strbuf.h"
#include "llmr/status.h"

#define LLMR_STOP_STRINGS_MAX 16
#define LLMR_STOP_STRING_MAX_BYTES 1024

typedef struct llmr_stop_matcher {
    char *stops[LLMR_STOP_STRINGS_MAX];
    size_t lens[LLMR_STOP_STRINGS_MAX];
    size_t count;
    llmr_strbuf held; /* text not yet released: it may begin a stop string */
    bool stopped;
} llmr_stop_matcher;

/* Copies the stop strings: at most LLMR_STOP_STRINGS_MAX, each non-empty, valid
 * UTF-8 and at most LLMR_STOP_STRING_MAX_BYTES.  INVALID_ARGUMENT names the one at
 * fault. */
llmr_status llmr_stop_matcher_init(llmr_stop_matcher *m, const char *const *stops,
                                   const size_t *lens, size_t count, llmr_strbuf *err);
void llmr_stop_matcher_free(llmr_stop_matcher *m);

/* Feeds the next piece of text and appends to `out` what is now certain to be
 * output.  Returns true when a stop string is complete: `out` then ends just before
 * it, and the matcher takes no more text. */
bool llmr_stop_matcher_push(llmr_stop_matcher *m, const char *text, size_t len, llmr_strbuf *out);

/* The generation ended for another reason: releases the held-back text. */
void llmr_stop_matcher_flush(llmr_stop_matcher *m, llmr_strbuf *out);

#endif
