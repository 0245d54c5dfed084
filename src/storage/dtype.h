/* The element types of safetensors files: names as they appear in headers, and
 * their width in bits (sub-byte types F4 and F6 pack several elements per byte). */
#ifndef LLMR_STORAGE_DTYPE_H
#define LLMR_STORAGE_DTYPE_H

#include <stdbool.h>
#include <stdint.h>

#include "common/strbuf.h"

/* X(NAME, bits, is_float) in the order of the safetensors specification. */
#define LLMR_DTYPE_LIST(X) \
    X(BOOL, 8, false)      \
    X(F4, 4, true)         \
    X(F6_E2M3, 6, true)    \
    X(F6_E3M2, 6, true)    \
    X(U8, 8, false)        \
    X(I8, 8, false)        \
    X(F8_E5M2, 8, true)    \
    X(F8_E4M3, 8, true)    \
    X(F8_E8M0, 8, true)    \
    X(I16, 16, false)      \
    X(U16, 16, false)      \
    X(F16, 16, true)       \
    X(BF16, 16, true)      \
    X(I32, 32, false)      \
    X(U32, 32, false)      \
    X(F32, 32, true)       \
    X(C64, 64, false)      \
    X(F64, 64, true)       \
    X(I64, 64, false)      \
    X(U64, 64, false)

typedef enum llmr_dtype {
#define LLMR_DTYPE_ENUM(name, bits, is_float) LLMR_DTYPE_##name,
    LLMR_DTYPE_LIST(LLMR_DTYPE_ENUM)
#undef LLMR_DTYPE_ENUM
    LLMR_DTYPE_COUNT
} llmr_dtype;

/* True and *out set when `name` is a known dtype ("BF16"); case-sensitive, as the
 * format is. */
bool llmr_dtype_parse(const char *name, llmr_dtype *out);
const char *llmr_dtype_name(llmr_dtype dtype);
unsigned llmr_dtype_bits(llmr_dtype dtype);
/* F16, BF16, F32, F64 and the 8-, 6- and 4-bit float formats. */
bool llmr_dtype_is_float(llmr_dtype dtype);

/* Appends "[2880, 4096]" (rank 0: "[]"). */
void llmr_shape_format(llmr_strbuf *sb, uint32_t rank, const uint64_t *shape);

#endif
