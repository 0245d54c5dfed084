/* A hash map from strings to size_t values (indexes into the caller's arrays).
 *
 * Keys are copied.  Open addressing with linear probing; the table grows at 70%
 * load.  Used wherever tensor or file names are looked up (a model can have
 * hundreds of thousands of tensors). */
#ifndef LLMR_COMMON_STRMAP_H
#define LLMR_COMMON_STRMAP_H

#include <stdbool.h>
#include <stddef.h>

typedef struct llmr_strmap llmr_strmap;

/* NULL when out of memory.  `expected` sizes the first table (0 is fine). */
llmr_strmap *llmr_strmap_create(size_t expected);
void llmr_strmap_free(llmr_strmap *map);

typedef enum llmr_strmap_put_result {
    LLMR_STRMAP_ADDED,
    LLMR_STRMAP_EXISTS, /* the key was there; its value is unchanged */
    LLMR_STRMAP_NOMEM
} llmr_strmap_put_result;

/* Adds key -> value unless the key is present. */
llmr_strmap_put_result llmr_strmap_put(llmr_strmap *map, const char *key, size_t value);
/* True and *value set when the key is present. */
bool llmr_strmap_get(const llmr_strmap *map, const char *key, size_t *value);
size_t llmr_strmap_count(const llmr_strmap *map);

#endif
