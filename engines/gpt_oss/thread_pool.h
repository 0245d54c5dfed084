/* A fixed pool of threads for the CPU path of the gpt-oss engine: parallel_for runs
 * fn(ctx, i) for i in [0, n) split into contiguous ranges, one per thread, and
 * returns when all are done.  Each index is computed by exactly one thread, so
 * results do not depend on the number of threads.  Calls from several threads
 * (several requests) take turns. */
#ifndef GPT_OSS_THREAD_POOL_H
#define GPT_OSS_THREAD_POOL_H

#include <stddef.h>

typedef struct gpt_pool gpt_pool;

/* threads: 0 means the number of online CPUs.  NULL when out of memory. */
gpt_pool *gpt_pool_create(unsigned threads);
void gpt_pool_free(gpt_pool *p);
unsigned gpt_pool_threads(const gpt_pool *p);

/* fn is called with ranges [begin, end) covering [0, n). */
typedef void (*gpt_range_fn)(void *ctx, size_t begin, size_t end);
void gpt_pool_for(gpt_pool *p, size_t n, gpt_range_fn fn, void *ctx);

#endif
