/* String -> index hash map: see strmap.h. */
#include "common/strmap.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct slot {
    char *key; /* NULL: empty */
    size_t value;
    uint64_t hash;
} slot;

struct llmr_strmap {
    slot *slots;
    size_t cap; /* a power of two */
    size_t count;
};

static uint64_t hash_key(const char *s)
{
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (; *s; s++) {
        h ^= (unsigned char)*s;
        h *= 1099511628211ull;
    }
    return h;
}

llmr_strmap *llmr_strmap_create(size_t expected)
{
    llmr_strmap *map = calloc(1, sizeof *map);
    if (!map)
        return NULL;
    size_t cap = 16;
    while (cap < expected + expected / 2 + 1 && cap < ((size_t)1 << 40))
        cap *= 2;
    map->slots = calloc(cap, sizeof *map->slots);
    if (!map->slots) {
        free(map);
        return NULL;
    }
    map->cap = cap;
    return map;
}

void llmr_strmap_free(llmr_strmap *map)
{
    if (!map)
        return;
    for (size_t i = 0; i < map->cap; i++)
        free(map->slots[i].key);
    free(map->slots);
    free(map);
}

static slot *find_slot(slot *slots, size_t cap, const char *key, uint64_t h)
{
    size_t i = (size_t)h & (cap - 1);
    for (;;) {
        slot *s = &slots[i];
        if (!s->key || (s->hash == h && strcmp(s->key, key) == 0))
            return s;
        i = (i + 1) & (cap - 1);
    }
}

static bool grow(llmr_strmap *map)
{
    size_t cap = map->cap * 2;
    slot *slots = calloc(cap, sizeof *slots);
    if (!slots)
        return false;
    for (size_t i = 0; i < map->cap; i++) {
        slot *old = &map->slots[i];
        if (old->key)
            *find_slot(slots, cap, old->key, old->hash) = *old;
    }
    free(map->slots);
    map->slots = slots;
    map->cap = cap;
    return true;
}

llmr_strmap_put_result llmr_strmap_put(llmr_strmap *map, const char *key, size_t value)
{
    if ((map->count + 1) * 10 > map->cap * 7 && !grow(map))
        return LLMR_STRMAP_NOMEM;
    uint64_t h = hash_key(key);
    slot *s = find_slot(map->slots, map->cap, key, h);
    if (s->key)
        return LLMR_STRMAP_EXISTS;
    s->key = strdup(key);
    if (!s->key)
        return LLMR_STRMAP_NOMEM;
    s->hash = h;
    s->value = value;
    map->count++;
    return LLMR_STRMAP_ADDED;
}

bool llmr_strmap_get(const llmr_strmap *map, const char *key, size_t *value)
{
    const slot *s = find_slot(map->slots, map->cap, key, hash_key(key));
    if (!s->key)
        return false;
    if (value)
        *value = s->value;
    return true;
}

size_t llmr_strmap_count(const llmr_strmap *map)
{
    return map->count;
}
