/* The bump allocator of the template renderer: blocks chained from the newest, freed
 * all at once.  A compiled template keeps one for its tree; each render has its own for
 * its values, so a render frees everything it made in one call. */
#include <stdlib.h>
#include <string.h>

#include "template/tpl_internal.h"

struct tpl_arena_block {
    tpl_arena_block *next;
    size_t cap;
    bool borrowed; /* the caller's memory (tpl_arena_init_buffer): not freed here */
    max_align_t data[];
};

#define FIRST_BLOCK 8192u

void tpl_arena_init(tpl_arena *a)
{
    memset(a, 0, sizeof *a);
}

void tpl_arena_init_buffer(tpl_arena *a, void *mem, size_t size)
{
    tpl_arena_init(a);
    if (size <= sizeof(tpl_arena_block))
        return;
    tpl_arena_block *b = mem;
    b->next = NULL;
    b->cap = size - sizeof *b;
    b->borrowed = true;
    a->head = b;
    a->base = (char *)b->data;
    a->cap = b->cap;
}

void tpl_arena_free(tpl_arena *a)
{
    tpl_arena_block *b = a->head;
    while (b) {
        tpl_arena_block *next = b->next;
        if (!b->borrowed)
            free(b);
        b = next;
    }
    a->head = NULL;
    a->base = NULL;
    a->used = a->cap = 0;
}

void *tpl_alloc(tpl_arena *a, size_t n)
{
    void *p = tpl_alloc_raw(a, n);
    if (p)
        memset(p, 0, n);
    return p;
}

void *tpl_arena_grow(tpl_arena *a, size_t n)
{
    size_t align = TPL_ARENA_ALIGN;
    if (n > TPL_ARENA_LARGEST) {
        if (a->oom)
            longjmp(*a->oom, 1);
        return NULL;
    }
    n = (n + align - 1) & ~(align - 1);
    if (n == 0)
        n = align;
    if (a->head && a->cap - a->used >= n) { /* only a zero-byte request comes here with room */
        void *p = a->base + a->used;
        a->used += n;
        return p;
    }
    size_t cap = a->cap ? a->cap * 2 : FIRST_BLOCK;
    if (cap > (1u << 20))
        cap = 1u << 20;
    if (cap < n)
        cap = n;
    tpl_arena_block *b = malloc(sizeof *b + cap);
    if (!b) {
        if (a->oom)
            longjmp(*a->oom, 1);
        return NULL;
    }
    b->next = a->head;
    b->cap = cap;
    b->borrowed = false;
    a->head = b;
    a->base = (char *)b->data;
    a->cap = cap;
    a->used = n;
    return a->base;
}

void *tpl_alloc_array(tpl_arena *a, size_t count, size_t size)
{
    if (size && count > TPL_ARENA_LARGEST / size)
        return tpl_alloc(a, TPL_ARENA_LARGEST + 1); /* fails the same way */
    return tpl_alloc(a, count * size);
}

char *tpl_strndup(tpl_arena *a, const char *s, size_t n)
{
    char *d = tpl_alloc_raw(a, n + 1);
    if (d) {
        if (n)
            memcpy(d, s, n);
        d[n] = 0;
    }
    return d;
}
