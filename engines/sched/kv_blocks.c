/* The KV block pool: a stack of free block numbers (kv_blocks.h). */
#include "kv_blocks.h"

#include <stdlib.h>

bool llmr_kv_blocks_init(llmr_kv_blocks *p, uint32_t total)
{
    p->total = total;
    p->free = total;
    p->free_ids = malloc((total ? total : 1) * sizeof *p->free_ids);
    p->in_use = calloc(total ? total : 1, 1);
    if (!p->free_ids || !p->in_use) {
        llmr_kv_blocks_free(p);
        return false;
    }
    /* popped from the end: block 0 first */
    for (uint32_t i = 0; i < total; i++)
        p->free_ids[i] = total - 1 - i;
    return true;
}

void llmr_kv_blocks_free(llmr_kv_blocks *p)
{
    free(p->free_ids);
    free(p->in_use);
    p->free_ids = NULL;
    p->in_use = NULL;
    p->total = p->free = 0;
}

bool llmr_kv_blocks_take(llmr_kv_blocks *p, uint32_t n, uint32_t *out)
{
    if (n > p->free)
        return false;
    for (uint32_t i = 0; i < n; i++) {
        uint32_t id = p->free_ids[--p->free];
        p->in_use[id] = 1;
        out[i] = id;
    }
    return true;
}

bool llmr_kv_blocks_give(llmr_kv_blocks *p, uint32_t id)
{
    if (id >= p->total || !p->in_use[id])
        return false;
    p->in_use[id] = 0;
    p->free_ids[p->free++] = id;
    return true;
}
