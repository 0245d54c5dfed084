/* Comma-separated lists of settings and fields ("a, b,c"): one item at a time, with the
 * spaces and tabs around it trimmed.  Used wherever llmr reads such a list (CORS
 * origins, key scopes). */
#ifndef LLMR_COMMON_LIST_ITEM_H
#define LLMR_COMMON_LIST_ITEM_H

#include <stdbool.h>
#include <stddef.h>

/* The item at *p into *item and *n (trimmed; may be empty), *p moved past it and its
 * comma; false, with nothing read, once the list has ended (after its last item; a
 * list of "" has one empty item). */
bool llmr_list_next(const char **p, const char **item, size_t *n);

#endif
