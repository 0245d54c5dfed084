/* A strict, fast, pull-style JSON reader for large documents (a tokenizer.json of
 * 30 MB with 200,000 vocabulary entries and 450,000 merges), where building a tree
 * would cost seconds and hundreds of megabytes.  The caller walks the document:
 *
 *   llmr_jscan_object_begin(&s);
 *   while (llmr_jscan_object_next(&s, &key)) { ...read or skip the value... }
 *   if (s.failed) ...s.error says where and why...
 *
 * Strictness matches RFC 8259 plus what llmr requires of every document: strings
 * are valid UTF-8 (escapes included: no lone surrogates, no NUL), nesting is capped,
 * numbers are well formed.  Small sub-documents can be handed to jansson through
 * llmr_jscan_raw. */
#ifndef LLMR_COMMON_JSON_SCAN_H
#define LLMR_COMMON_JSON_SCAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/strbuf.h"

#define LLMR_JSCAN_MAX_DEPTH 256u

typedef struct llmr_jscan {
    const char *start;
    const char *p;
    const char *end;
    unsigned depth;
    uint64_t need_comma[LLMR_JSCAN_MAX_DEPTH / 64]; /* per depth: an element was read */
    bool failed;
    char error[192]; /* "line L, column C: why" once failed */
} llmr_jscan;

void llmr_jscan_init(llmr_jscan *s, const char *text, size_t len);

/* The first character of the next value ('{', '[', '"', 't', 'f', 'n', '-' or a
 * digit) after whitespace, without consuming it; 0 at the end of input. */
char llmr_jscan_peek(llmr_jscan *s);

bool llmr_jscan_object_begin(llmr_jscan *s);
/* Reads the next member's key into `key` (reset first) and stops before its value.
 * False at the closing brace (consumed) or on error (s->failed). */
bool llmr_jscan_object_next(llmr_jscan *s, llmr_strbuf *key);
/* As llmr_jscan_object_next, but the key is appended to `keys` (not reset). */
bool llmr_jscan_object_next_into(llmr_jscan *s, llmr_strbuf *keys);
bool llmr_jscan_array_begin(llmr_jscan *s);
/* True when another element follows (stops before it); false at the closing
 * bracket (consumed) or on error. */
bool llmr_jscan_array_next(llmr_jscan *s);

/* Reads a string value, decoded, appended to out. */
bool llmr_jscan_string(llmr_jscan *s, llmr_strbuf *out);
/* Reads an integer value (no fraction or exponent) that fits in int64_t. */
bool llmr_jscan_int(llmr_jscan *s, int64_t *out);
/* Reads true or false. */
bool llmr_jscan_bool(llmr_jscan *s, bool *out);
/* Consumes null when it is next; false (nothing consumed) otherwise. */
bool llmr_jscan_null(llmr_jscan *s);
/* Skips one value of any kind, checking it. */
bool llmr_jscan_skip(llmr_jscan *s);
/* Skips one value and returns its raw text. */
bool llmr_jscan_raw(llmr_jscan *s, const char **text, size_t *len);
/* True when only whitespace is left. */
bool llmr_jscan_at_end(llmr_jscan *s);

/* Marks the scan failed at the current position with a message (first one wins). */
void llmr_jscan_fail(llmr_jscan *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
