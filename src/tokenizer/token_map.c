/* Token and merge hash tables: see token_map.h. */
#define _DEFAULT_SOURCE /* MAP_ANONYMOUS, MADV_HUGEPAGE */
#include "tokenizer/token_map.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define INLINE_KEY 16

/* One cache-friendly slot: keys up to 16 bytes live in the slot itself, so a lookup
 * touches one cache line; longer keys live in the pool. */
struct token_slot {
    uint64_t hash; /* 0: empty (hashes are forced odd) */
    uint32_t length, id;
    union {
        char key[INLINE_KEY];
        uint32_t offset;
    } k;
};

struct merge_slot {
    uint64_t key; /* (left << 32 | right) + 1; 0: empty */
    uint32_t rank, merged;
};

uint64_t llmr_token_map_hash(const char *p, size_t n)
{
    uint64_t h = 0x9e3779b97f4a7c15ull ^ (n * 0xff51afd7ed558ccdull);
    while (n >= 8) {
        uint64_t v;
        memcpy(&v, p, 8);
        h = (h ^ v) * 0xff51afd7ed558ccdull;
        h ^= h >> 32;
        p += 8;
        n -= 8;
    }
    uint64_t v = 0;
    memcpy(&v, p, n);
    h = (h ^ v) * 0xc4ceb9fe1a85ec53ull;
    h ^= h >> 29;
    return h | 1;
}

/* Tables of 2 MiB and more (a 200,000-token vocabulary's is 16 MiB) are mapped on
 * their own, 2 MiB aligned and offered transparent huge pages: a bulk load touches
 * every page once, and with 4 KiB pages its page faults and TLB misses cost as much
 * as the hashing.  Smaller ones come from calloc. */
#define HUGE_PAGE ((size_t)2 << 20)

static void *table_alloc(size_t count, size_t size)
{
    if (size && count > (SIZE_MAX - HUGE_PAGE) / size)
        return NULL;
    size_t bytes = count * size;
    if (bytes < HUGE_PAGE)
        return calloc(count, size);
    size_t span = bytes + HUGE_PAGE;
    char *m = mmap(NULL, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED)
        return NULL;
    char *p = (char *)(((uintptr_t)m + HUGE_PAGE - 1) & ~(uintptr_t)(HUGE_PAGE - 1));
    if (p > m)
        munmap(m, (size_t)(p - m));
    if (m + span > p + bytes)
        munmap(p + bytes, (size_t)(m + span - (p + bytes)));
#ifdef MADV_HUGEPAGE
    madvise(p, bytes, MADV_HUGEPAGE); /* advice only: without it the table still works */
#endif
    return p; /* anonymous pages read as zero, as calloc's do */
}

static void table_free(void *p, size_t count, size_t size)
{
    if (!p)
        return;
    if (count * size < HUGE_PAGE)
        free(p);
    else
        munmap(p, count * size);
}

static size_t table_size(size_t expected)
{
    size_t cap = 64;
    while (cap < expected * 2)
        cap *= 2;
    return cap;
}

bool llmr_token_map_init(llmr_token_map *m, size_t expected)
{
    memset(m, 0, sizeof *m);
    m->cap = table_size(expected);
    m->slots = table_alloc(m->cap, sizeof *m->slots);
    return m->slots != NULL;
}

void llmr_token_map_free(llmr_token_map *m)
{
    table_free(m->slots, m->cap, sizeof *m->slots);
    free(m->pool);
    memset(m, 0, sizeof *m);
}

static bool grow_tokens(llmr_token_map *m)
{
    size_t cap = m->cap * 2;
    struct token_slot *slots = table_alloc(cap, sizeof *slots);
    if (!slots)
        return false;
    for (size_t i = 0; i < m->cap; i++) {
        if (!m->slots[i].hash)
            continue;
        size_t j = m->slots[i].hash & (cap - 1);
        while (slots[j].hash)
            j = (j + 1) & (cap - 1);
        slots[j] = m->slots[i];
    }
    table_free(m->slots, m->cap, sizeof *m->slots);
    m->slots = slots;
    m->cap = cap;
    return true;
}

static const char *slot_key(const llmr_token_map *m, const struct token_slot *s)
{
    return s->length <= INLINE_KEY ? s->k.key : m->pool + s->k.offset;
}

bool llmr_token_map_reserve(llmr_token_map *m, size_t expected)
{
    size_t cap = table_size(expected);
    if (m->cap >= cap)
        return true;
    if (m->count == 0) { /* nothing to move: one new table */
        struct token_slot *slots = table_alloc(cap, sizeof *slots);
        if (!slots)
            return false;
        table_free(m->slots, m->cap, sizeof *m->slots);
        m->slots = slots;
        m->cap = cap;
        return true;
    }
    while (m->cap < cap)
        if (!grow_tokens(m))
            return false;
    return true;
}

int llmr_token_map_put(llmr_token_map *m, const char *key, size_t len, uint32_t id)
{
    return llmr_token_map_put_hashed(m, key, len, llmr_token_map_hash(key, len), id);
}

int llmr_token_map_put_hashed(llmr_token_map *m, const char *key, size_t len, uint64_t h, uint32_t id)
{
    if (len > UINT32_MAX || m->pool_len + len > UINT32_MAX)
        return -1;
    if ((m->count + 1) * 2 > m->cap && !grow_tokens(m))
        return -1;
    size_t i = h & (m->cap - 1);
    while (m->slots[i].hash) {
        struct token_slot *s = &m->slots[i];
        if (s->hash == h && s->length == len && memcmp(slot_key(m, s), key, len) == 0)
            return 0;
        i = (i + 1) & (m->cap - 1);
    }
    struct token_slot *slot = &m->slots[i];
    if (len <= INLINE_KEY) {
        memset(slot, 0, sizeof *slot);
        memcpy(slot->k.key, key, len);
        slot->hash = h;
        slot->length = (uint32_t)len;
        slot->id = id;
        m->count++;
        return 1;
    }
    if (m->pool_len + len > m->pool_cap) {
        size_t cap = m->pool_cap ? m->pool_cap : 4096;
        while (cap < m->pool_len + len)
            cap *= 2;
        char *pool = realloc(m->pool, cap);
        if (!pool)
            return -1;
        m->pool = pool;
        m->pool_cap = cap;
    }
    memcpy(m->pool + m->pool_len, key, len);
    slot->hash = h;
    slot->length = (uint32_t)len;
    slot->id = id;
    slot->k.offset = (uint32_t)m->pool_len;
    m->pool_len += len;
    m->count++;
    return 1;
}

int64_t llmr_token_map_get_hashed(const llmr_token_map *m, const char *key, size_t len, uint64_t h)
{
    size_t i = h & (m->cap - 1);
    for (;;) {
        const struct token_slot *s = &m->slots[i];
        if (!s->hash)
            return -1;
        if (s->hash == h && s->length == len && memcmp(slot_key(m, s), key, len) == 0)
            return s->id;
        i = (i + 1) & (m->cap - 1);
    }
}

int64_t llmr_token_map_get(const llmr_token_map *m, const char *key, size_t len)
{
    return llmr_token_map_get_hashed(m, key, len, llmr_token_map_hash(key, len));
}

void llmr_token_map_prefetch(const llmr_token_map *m, uint64_t h)
{
    __builtin_prefetch(&m->slots[h & (m->cap - 1)]);
}

bool llmr_merge_map_init(llmr_merge_map *m, size_t expected)
{
    memset(m, 0, sizeof *m);
    m->cap = table_size(expected);
    m->slots = table_alloc(m->cap, sizeof *m->slots);
    return m->slots != NULL;
}

void llmr_merge_map_free(llmr_merge_map *m)
{
    table_free(m->slots, m->cap, sizeof *m->slots);
    memset(m, 0, sizeof *m);
}

static size_t merge_index(uint64_t key, size_t cap);

void llmr_merge_map_prefetch(const llmr_merge_map *m, uint32_t left, uint32_t right)
{
    uint64_t key = ((uint64_t)left << 32 | right) + 1;
    __builtin_prefetch(&m->slots[merge_index(key, m->cap)], 1);
}

static size_t merge_index(uint64_t key, size_t cap)
{
    /* murmur3's 64-bit finalizer: every key bit reaches the low bits used. */
    uint64_t h = key;
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 33;
    h *= 0xc4ceb9fe1a85ec53ull;
    h ^= h >> 33;
    return (size_t)h & (cap - 1);
}

static bool grow_merges(llmr_merge_map *m)
{
    size_t cap = m->cap * 2;
    struct merge_slot *slots = table_alloc(cap, sizeof *slots);
    if (!slots)
        return false;
    for (size_t i = 0; i < m->cap; i++) {
        if (!m->slots[i].key)
            continue;
        size_t j = merge_index(m->slots[i].key, cap);
        while (slots[j].key)
            j = (j + 1) & (cap - 1);
        slots[j] = m->slots[i];
    }
    table_free(m->slots, m->cap, sizeof *m->slots);
    m->slots = slots;
    m->cap = cap;
    return true;
}

bool llmr_merge_map_put(llmr_merge_map *m, uint32_t left, uint32_t right, uint32_t rank,
                        uint32_t merged)
{
    if ((m->count + 1) * 2 > m->cap && !grow_merges(m))
        return false;
    uint64_t key = ((uint64_t)left << 32 | right) + 1;
    size_t i = merge_index(key, m->cap);
    while (m->slots[i].key) {
        if (m->slots[i].key == key)
            return true;
        i = (i + 1) & (m->cap - 1);
    }
    m->slots[i] = (struct merge_slot){key, rank, merged};
    m->count++;
    return true;
}

bool llmr_merge_map_get(const llmr_merge_map *m, uint32_t left, uint32_t right, uint32_t *rank,
                        uint32_t *merged)
{
    uint64_t key = ((uint64_t)left << 32 | right) + 1;
    size_t i = merge_index(key, m->cap);
    for (;;) {
        const struct merge_slot *s = &m->slots[i];
        if (!s->key)
            return false;
        if (s->key == key) {
            *rank = s->rank;
            *merged = s->merged;
            return true;
        }
        i = (i + 1) & (m->cap - 1);
    }
}
