/* libFuzzer target: the model.safetensors.index.json parser. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "common/fs_util.h"
#include "storage/st_index.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    llmr_problems problems;
    llmr_problems_init(&problems);
    llmr_st_index ix;
    if (llmr_st_index_parse((const char *)data, size, "fuzz", &ix, &problems) == LLMR_OK) {
        for (size_t i = 0; i < ix.shard_count; i++)
            if (!llmr_file_name_is_safe(ix.shards[i]))
                __builtin_trap(); /* no shard name may leave the directory */
        for (size_t i = 0; i < ix.tensor_count; i++) {
            size_t shard;
            if (!llmr_st_index_find(&ix, ix.tensors[i], &shard) || shard >= ix.shard_count)
                __builtin_trap();
        }
        llmr_st_index_free(&ix);
    } else if (problems.count == 0 && problems.dropped == 0) {
        __builtin_trap();
    }
    llmr_problems_free(&problems);
    return 0;
}
