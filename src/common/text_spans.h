/* Byte ranges of a text: which bytes of a rendered chat prompt came from the request's
 * own strings and must be tokenized as plain text (template/chat_text.h makes them,
 * tokenizer/tokenizer.h's llmr_tokenizer_encode_text reads them).  Kept sorted by
 * offset and without overlaps by whoever fills them. */
#ifndef LLMR_COMMON_TEXT_SPANS_H
#define LLMR_COMMON_TEXT_SPANS_H

#include <stdbool.h>
#include <stddef.h>

typedef struct llmr_text_span {
    size_t off, len;
} llmr_text_span;

typedef struct llmr_text_spans {
    llmr_text_span *v;
    size_t n, cap;
    bool failed; /* a push ran out of memory */
} llmr_text_spans;

#define LLMR_TEXT_SPANS_INIT {NULL, 0, 0, false}

/* Appends [off, off + len); one that touches or overlaps the last span (the spans
 * come in order) extends it.  Empty spans are dropped. */
void llmr_text_spans_push(llmr_text_spans *s, size_t off, size_t len);
void llmr_text_spans_free(llmr_text_spans *s);
/* Whether [off, off + len) shares a byte with a span (binary search). */
bool llmr_text_spans_overlap(const llmr_text_span *v, size_t n, size_t off, size_t len);
/* Whether the spans are in order, apart, and within a text of text_len bytes. */
bool llmr_text_spans_valid(const llmr_text_span *v, size_t n, size_t text_len);

#endif
