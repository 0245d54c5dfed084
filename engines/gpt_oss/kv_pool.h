/* A first-fit allocator of byte ranges inside one fixed region (the CUDA path's KV
 * pool: one device allocation made at load, sliced per request).  It hands out
 * offsets, never touches the memory, and is not thread-safe (the caller locks).
 * Plain C, so its tests run without a GPU. */
#ifndef GPT_OSS_KV_POOL_H
#define GPT_OSS_KV_POOL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct gpt_range {
    uint64_t off, len;
} gpt_range;

typedef struct gpt_kv_pool {
    uint64_t size;     /* bytes in the region */
    uint64_t align;    /* every offset and length is a multiple (a power of two) */
    gpt_range *used;   /* sorted by offset, not overlapping */
    size_t n, cap;
    uint64_t in_use;   /* sum of used lengths */
} gpt_kv_pool;

/* align: a power of two (0: 256). */
void gpt_kv_pool_init(gpt_kv_pool *p, uint64_t size, uint64_t align);
void gpt_kv_pool_free_all(gpt_kv_pool *p);

/* The lowest free offset with room for len bytes (rounded up to align).  False when
 * no gap is large enough (or out of host memory, or len is 0). */
bool gpt_kv_pool_alloc(gpt_kv_pool *p, uint64_t len, uint64_t *off);
/* Returns the range that starts at off.  False when no range starts there. */
bool gpt_kv_pool_release(gpt_kv_pool *p, uint64_t off);
/* The largest free gap. */
uint64_t gpt_kv_pool_largest_free(const gpt_kv_pool *p);

#ifdef __cplusplus
}
#endif

#endif
