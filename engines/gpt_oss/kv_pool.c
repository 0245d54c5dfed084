/* The KV pool's range allocator: see kv_pool.h. */
#include "kv_pool.h"

#include <stdlib.h>
#include <string.h>

void gpt_kv_pool_init(gpt_kv_pool *p, uint64_t size, uint64_t align)
{
    memset(p, 0, sizeof *p);
    p->align = align ? align : 256;
    p->size = size / p->align * p->align;
}

void gpt_kv_pool_free_all(gpt_kv_pool *p)
{
    free(p->used);
    p->used = NULL;
    p->n = p->cap = 0;
    p->in_use = 0;
}

static uint64_t round_up(const gpt_kv_pool *p, uint64_t len)
{
    return (len + p->align - 1) / p->align * p->align;
}

bool gpt_kv_pool_alloc(gpt_kv_pool *p, uint64_t len, uint64_t *off)
{
    if (len == 0 || len > p->size)
        return false;
    len = round_up(p, len);
    uint64_t start = 0;
    size_t at = 0;
    for (; at <= p->n; at++) {
        uint64_t end = at < p->n ? p->used[at].off : p->size;
        if (end - start >= len)
            break;
        if (at < p->n)
            start = p->used[at].off + p->used[at].len;
    }
    if (at > p->n)
        return false;
    if (p->n == p->cap) {
        size_t cap = p->cap ? p->cap * 2 : 8;
        gpt_range *grown = realloc(p->used, cap * sizeof *grown);
        if (!grown)
            return false;
        p->used = grown;
        p->cap = cap;
    }
    memmove(p->used + at + 1, p->used + at, (p->n - at) * sizeof *p->used);
    p->used[at].off = start;
    p->used[at].len = len;
    p->n++;
    p->in_use += len;
    *off = start;
    return true;
}

bool gpt_kv_pool_release(gpt_kv_pool *p, uint64_t off)
{
    for (size_t i = 0; i < p->n; i++)
        if (p->used[i].off == off) {
            p->in_use -= p->used[i].len;
            memmove(p->used + i, p->used + i + 1, (p->n - i - 1) * sizeof *p->used);
            p->n--;
            return true;
        }
    return false;
}

uint64_t gpt_kv_pool_largest_free(const gpt_kv_pool *p)
{
    uint64_t best = 0, start = 0;
    for (size_t i = 0; i <= p->n; i++) {
        uint64_t end = i < p->n ? p->used[i].off : p->size;
        if (end - start > best)
            best = end - start;
        if (i < p->n)
            start = p->used[i].off + p->used[i].len;
    }
    return best;
}
