/* A growable array of token ids (what encode produces and decode consumes). */
#ifndef LLMR_TOKENIZER_IDS_H
#define LLMR_TOKENIZER_IDS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

typedef struct llmr_ids {
    uint32_t *data;
    size_t count;
    size_t cap;
} llmr_ids;

#define LLMR_IDS_INIT {NULL, 0, 0}

static inline bool llmr_ids_reserve(llmr_ids *ids, size_t extra)
{
    if (ids->count + extra <= ids->cap)
        return true;
    size_t cap = ids->cap ? ids->cap : 64;
    while (cap < ids->count + extra)
        cap *= 2;
    uint32_t *d = (uint32_t *)realloc(ids->data, cap * sizeof *d);
    if (!d)
        return false;
    ids->data = d;
    ids->cap = cap;
    return true;
}

static inline bool llmr_ids_push(llmr_ids *ids, uint32_t id)
{
    if (ids->count == ids->cap && !llmr_ids_reserve(ids, 1))
        return false;
    ids->data[ids->count++] = id;
    return true;
}

static inline void llmr_ids_free(llmr_ids *ids)
{
    free(ids->data);
    ids->data = NULL;
    ids->count = ids->cap = 0;
}

#endif
