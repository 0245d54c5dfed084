/* Comparing a secret someone presented with the one expected, in time that tells
 * nothing of either (neither their common prefix nor the expected one's length). */
#ifndef LLMR_COMMON_SECRET_H
#define LLMR_COMMON_SECRET_H

#include <stdbool.h>

/* Whether given equals want; false when either is NULL. */
bool llmr_secret_equal(const char *given, const char *want);

#endif
