/* model.safetensors.index.json: which shard holds which tensor.
 *
 * The index is checked before any file it names is touched: weight_map must be an
 * object of tensor name -> shard file name, every shard name must be one plain file
 * name ending in ".safetensors" (no directories, no "..": an index cannot point
 * outside the model), and the counts are capped. */
#ifndef LLMR_STORAGE_ST_INDEX_H
#define LLMR_STORAGE_ST_INDEX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/problems.h"
#include "common/strmap.h"

#define LLMR_ST_INDEX_FILE "model.safetensors.index.json"
#define LLMR_ST_INDEX_MAX_BYTES (64u << 20)
#define LLMR_ST_INDEX_MAX_TENSORS (1u << 21)

typedef struct llmr_st_index {
    char **shards;        /* distinct shard file names, sorted */
    size_t shard_count;
    char **tensors;       /* tensor names, in the index's order */
    size_t *tensor_shard; /* tensors[i] lives in shards[tensor_shard[i]] */
    size_t tensor_count;
    llmr_strmap *by_name; /* tensor name -> i */
    bool has_total_size;  /* metadata.total_size was present */
    uint64_t total_size;
} llmr_st_index;

/* Parses index text; `file` names it in problems.  Returns OK or the code of the
 * first problem (MODEL_CORRUPT, LIMIT_EXCEEDED, OOM_RAM); on failure `out` holds
 * nothing to free. */
llmr_status llmr_st_index_parse(const char *text, size_t len, const char *file,
                                llmr_st_index *out, llmr_problems *problems);
void llmr_st_index_free(llmr_st_index *index);
/* The shard index of a tensor, or false when the index does not list it. */
bool llmr_st_index_find(const llmr_st_index *index, const char *tensor, size_t *shard);

#endif
