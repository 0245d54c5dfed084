/* A pool of fixed-size KV cache blocks, by number: which blocks are free, which are
 * handed out.  It never touches the memory the blocks stand for (the engine owns that:
 * block b is bytes [b * block_bytes, (b + 1) * block_bytes) of its cache), and it is
 * not thread-safe (the scheduler that owns it runs on one thread).  Plain C, so the
 * scheduler's tests run without a GPU.  See scheduler.h for how sequences use it. */
#ifndef LLMR_KV_BLOCKS_H
#define LLMR_KV_BLOCKS_H

#include <stdbool.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct llmr_kv_blocks {
    uint32_t total;  /* blocks in the pool */
    uint32_t free;   /* how many are free: free_ids[0..free) */
    uint32_t *free_ids;
    uint8_t *in_use; /* per block: 1 while handed out (catches a double release) */
} llmr_kv_blocks;

/* A pool of `total` blocks, all free.  False when out of host memory. */
bool llmr_kv_blocks_init(llmr_kv_blocks *p, uint32_t total);
void llmr_kv_blocks_free(llmr_kv_blocks *p);

/* n blocks into out[0..n), or false (nothing taken) when fewer than n are free.  The
 * lowest-numbered free blocks go first after a reset, then the most recently released. */
bool llmr_kv_blocks_take(llmr_kv_blocks *p, uint32_t n, uint32_t *out);
/* Gives block `id` back.  False (and nothing changes) when it is not handed out. */
bool llmr_kv_blocks_give(llmr_kv_blocks *p, uint32_t id);
static inline uint32_t llmr_kv_blocks_used(const llmr_kv_blocks *p)
{
    return p->total - p->free;
}

#ifdef __cplusplus
}
#endif

#endif
