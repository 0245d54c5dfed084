/* libFuzzer target: the safetensors reader.  An input starting with '{' is header text
 * (parsed with a data section of 1 MiB); any other input is a whole file (8-byte
 * length, header, data). */
#include <stddef.h>
#include <stdint.h>

#include "storage/safetensors.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    llmr_problems problems;
    llmr_problems_init(&problems);
    llmr_st_header h;
    llmr_status st;
    if (size > 0 && data[0] == '{')
        st = llmr_st_header_parse((const char *)data, size, 1u << 20, "fuzz", &h, &problems);
    else
        st = llmr_st_parse_buffer(data, size, "fuzz", &h, &problems);
    if (st == LLMR_OK) {
        for (size_t i = 0; i < h.count; i++)
            if (llmr_st_header_find(&h, h.tensors[i].name) != &h.tensors[i])
                __builtin_trap(); /* every tensor must be found under its own name */
        llmr_st_header_free(&h);
    } else if (problems.count == 0 && problems.dropped == 0) {
        __builtin_trap(); /* a failure must say why */
    }
    llmr_problems_free(&problems);
    return 0;
}
