/* safetensors dtypes: see dtype.h. */
#include "storage/dtype.h"

#include <string.h>

static const struct {
    const char *name;
    unsigned bits;
    bool is_float;
} dtypes[LLMR_DTYPE_COUNT] = {
#define DTYPE_ROW(name, bits, is_float) {#name, bits, is_float},
    LLMR_DTYPE_LIST(DTYPE_ROW)
#undef DTYPE_ROW
};

bool llmr_dtype_parse(const char *name, llmr_dtype *out)
{
    for (int i = 0; i < LLMR_DTYPE_COUNT; i++) {
        if (strcmp(dtypes[i].name, name) == 0) {
            *out = (llmr_dtype)i;
            return true;
        }
    }
    return false;
}

const char *llmr_dtype_name(llmr_dtype dtype)
{
    return (unsigned)dtype < LLMR_DTYPE_COUNT ? dtypes[dtype].name : "INVALID";
}

unsigned llmr_dtype_bits(llmr_dtype dtype)
{
    return (unsigned)dtype < LLMR_DTYPE_COUNT ? dtypes[dtype].bits : 0;
}

bool llmr_dtype_is_float(llmr_dtype dtype)
{
    return (unsigned)dtype < LLMR_DTYPE_COUNT && dtypes[dtype].is_float;
}

void llmr_shape_format(llmr_strbuf *sb, uint32_t rank, const uint64_t *shape)
{
    llmr_strbuf_putc(sb, '[');
    for (uint32_t i = 0; i < rank; i++)
        llmr_strbuf_printf(sb, i ? ", %llu" : "%llu", (unsigned long long)shape[i]);
    llmr_strbuf_putc(sb, ']');
}
