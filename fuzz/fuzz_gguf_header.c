/* libFuzzer target: the GGUF header reader, on a whole file in memory. */
#include <stddef.h>
#include <stdint.h>

#include "storage/gguf.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    llmr_problems problems;
    llmr_problems_init(&problems);
    llmr_gguf_header h;
    if (llmr_gguf_parse(data, size, "fuzz", &h, &problems) == LLMR_OK) {
        /* Every accepted tensor lies inside the file. */
        for (size_t i = 0; i < h.tensor_count; i++)
            if (h.data_offset + h.tensors[i].offset + h.tensors[i].bytes > size)
                __builtin_trap();
        llmr_gguf_header_free(&h);
    } else if (problems.count == 0 && problems.dropped == 0) {
        __builtin_trap();
    }
    llmr_problems_free(&problems);
    return 0;
}
