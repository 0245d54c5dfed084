/* Maps from byte strings to token ids, and from token-id pairs to merges: the two
 * hash tables the BPE model looks up for every word.  Open addressing, linear
 * probing, power-of-two sizes; keys live in one pool.  Built once at load, read-only
 * (and safe to share between threads) afterwards. */
#ifndef LLMR_TOKENIZER_TOKEN_MAP_H
#define LLMR_TOKENIZER_TOKEN_MAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct llmr_token_map {
    struct token_slot *slots;
    size_t cap;   /* power of two */
    size_t count;
    char *pool;
    size_t pool_len, pool_cap;
} llmr_token_map;

bool llmr_token_map_init(llmr_token_map *m, size_t expected);
void llmr_token_map_free(llmr_token_map *m);
/* Adds key -> id.  Returns 1 when added, 0 when the key was present (its first id
 * stays), -1 when out of memory. */
int llmr_token_map_put(llmr_token_map *m, const char *key, size_t len, uint32_t id);
/* Grows the table once to hold `expected` keys without further growth. */
bool llmr_token_map_reserve(llmr_token_map *m, size_t expected);
/* The id of key, or -1. */
int64_t llmr_token_map_get(const llmr_token_map *m, const char *key, size_t len);

/* For batched lookups and inserts: hash once, prefetch the slot, look up or add later
 * (bulk loads stall on one cache miss per key otherwise). */
uint64_t llmr_token_map_hash(const char *key, size_t len);
void llmr_token_map_prefetch(const llmr_token_map *m, uint64_t hash);
int64_t llmr_token_map_get_hashed(const llmr_token_map *m, const char *key, size_t len,
                                  uint64_t hash);
int llmr_token_map_put_hashed(llmr_token_map *m, const char *key, size_t len, uint64_t hash,
                              uint32_t id);

typedef struct llmr_merge_map {
    struct merge_slot *slots;
    size_t cap;
    size_t count;
} llmr_merge_map;

bool llmr_merge_map_init(llmr_merge_map *m, size_t expected);
void llmr_merge_map_free(llmr_merge_map *m);
/* Adds (left, right) -> (rank, merged); a pair seen before keeps its first entry. */
bool llmr_merge_map_put(llmr_merge_map *m, uint32_t left, uint32_t right, uint32_t rank,
                        uint32_t merged);
void llmr_merge_map_prefetch(const llmr_merge_map *m, uint32_t left, uint32_t right);
/* True with *rank and *merged when the pair merges. */
bool llmr_merge_map_get(const llmr_merge_map *m, uint32_t left, uint32_t right, uint32_t *rank,
                        uint32_t *merged);

#endif
