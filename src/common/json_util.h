/* JSON through jansson, with the rules llmr applies to every document from outside:
 * duplicate keys are an error (two values for one name is ambiguous), NUL in strings
 * is refused, size is capped before parsing, and errors read "line L, column C: why". */
#ifndef LLMR_COMMON_JSON_UTIL_H
#define LLMR_COMMON_JSON_UTIL_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/strbuf.h"
#include "llmr/status.h"

/* Parses len bytes; NULL on error with the reason in err. */
json_t *llmr_json_parse(const char *text, size_t len, llmr_strbuf *err);

/* Reads and parses a file of at most max_bytes.  *status tells why it failed:
 * NOT_FOUND, IO, LIMIT_EXCEEDED, or MODEL_CORRUPT for text that is not JSON. */
json_t *llmr_json_load_file(const char *path, size_t max_bytes, llmr_status *status,
                            llmr_strbuf *err);

/* A JSON value as a non-negative whole number that fits in uint64_t: integers, and
 * reals with no fractional part (config files written by Python hold "4096.0"). */
bool llmr_json_as_u64(const json_t *value, uint64_t *out);

/* A short rendering of a value for error messages ("\"abc\"", "-3", "an object"). */
void llmr_json_describe(llmr_strbuf *sb, const json_t *value);

/* Serialises in insertion order with a two-space indent; malloc'd, NULL on failure. */
char *llmr_json_pretty(const json_t *value);

#endif
