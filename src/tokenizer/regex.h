/* Regular expressions for tokenizer.json patterns, on PCRE2 in UTF + UCP mode with
 * JIT compilation.
 *
 * tokenizer.json patterns are written for Oniguruma (what Hugging Face tokenizers
 * uses).  Where the two engines differ on the classes these patterns use, the
 * pattern is rewritten before compiling: \s/\S become Unicode White_Space (PCRE2's
 * also matches U+180E), \w/\W letters, marks, decimal digits and connector
 * punctuation, \h/\H hexadecimal digits (Oniguruma's meaning), \uXXXX \x{XXXX}.
 * Iteration follows Oniguruma: after an empty match the search moves on one
 * character.
 *
 * A compiled regex is immutable and may be used from many threads at once; the
 * per-thread match state lives in thread-local storage.  Matching is bounded
 * (match and depth limits): a pathological pattern fails with an error instead of
 * running for ever. */
#ifndef LLMR_TOKENIZER_REGEX_H
#define LLMR_TOKENIZER_REGEX_H

#include <stdbool.h>
#include <stddef.h>

#include "common/strbuf.h"

typedef struct llmr_regex llmr_regex;

/* Compiles `pattern` (len bytes).  literal: match the text itself.  NULL on error,
 * with PCRE2's reason and the offset in err. */
llmr_regex *llmr_regex_compile(const char *pattern, size_t len, bool literal, llmr_strbuf *err);
void llmr_regex_free(llmr_regex *re);

/* Finds the first match in subject[from..len) (subject is valid UTF-8).  Returns 1
 * with start and end set, 0 when there is none, -1 when a limit stopped the search
 * (the reason in err). */
int llmr_regex_find(const llmr_regex *re, const char *subject, size_t len, size_t from,
                    size_t *start, size_t *end, llmr_strbuf *err);

/* Appends text to out with every non-overlapping match replaced by `with`
 * (tokenizers' NormalizedString::replace: an empty match inserts `with`). */
bool llmr_regex_replace_all(const llmr_regex *re, const char *text, size_t len, const char *with,
                            size_t with_len, llmr_strbuf *out, llmr_strbuf *err);

/* Rewrites an Oniguruma pattern for PCRE2 (exposed for tests). */
void llmr_regex_translate(const char *pattern, size_t len, llmr_strbuf *out);

#endif
