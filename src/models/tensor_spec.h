/* The tensors a model's config implies, and the check of a model's files against
 * them.  An architecture module (gpt_oss_config.c, nemotron_h_config.c) lists what
 * its config needs; llmr_tensor_specs_check compares that with what the shards hold
 * and names every tensor that is missing, has the wrong dtype or the wrong shape. */
#ifndef LLMR_MODELS_TENSOR_SPEC_H
#define LLMR_MODELS_TENSOR_SPEC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/problems.h"
#include "common/strmap.h"
#include "storage/dtype.h"

#define LLMR_SPEC_MAX_RANK 4u

typedef enum llmr_dtype_rule {
    LLMR_DTYPE_RULE_EXACT,     /* exactly `dtype` */
    LLMR_DTYPE_RULE_ANY_FLOAT  /* F32, F16 or BF16 (engines convert on load) */
} llmr_dtype_rule;

typedef struct llmr_tensor_spec {
    char *name;
    llmr_dtype_rule rule;
    llmr_dtype dtype;
    uint32_t rank;
    uint64_t shape[LLMR_SPEC_MAX_RANK];
} llmr_tensor_spec;

typedef struct llmr_tensor_specs {
    llmr_tensor_spec *items;
    size_t count;
    size_t cap;
    bool failed;          /* out of memory while adding */
    llmr_strmap *by_name; /* built by the first llmr_tensor_specs_contains */
} llmr_tensor_specs;

void llmr_tensor_specs_init(llmr_tensor_specs *s);
void llmr_tensor_specs_free(llmr_tensor_specs *s);

/* Adds a tensor named by fmt.  shape has `rank` entries (at most 4). */
void llmr_tensor_specs_add(llmr_tensor_specs *s, llmr_dtype_rule rule, llmr_dtype dtype,
                           uint32_t rank, const uint64_t *shape, const char *fmt, ...)
    __attribute__((format(printf, 6, 7)));

/* What a model's files hold for one tensor name. */
typedef struct llmr_found_tensor {
    llmr_dtype dtype;
    uint32_t rank;
    const uint64_t *shape;
    const char *file; /* the shard that holds it */
} llmr_found_tensor;

/* Looks a tensor up in the model's files; false when no file holds it. */
typedef bool (*llmr_tensor_lookup)(void *ctx, const char *name, llmr_found_tensor *out);

/* Checks every spec against the files.  Problems name the tensor; missing tensors are
 * attributed to `missing_file` (the index, or the single shard).  `why` says what
 * implied the tensors ("config.json (gpt_oss, 24 layers)"). */
void llmr_tensor_specs_check(const llmr_tensor_specs *s, llmr_tensor_lookup lookup, void *ctx,
                             const char *missing_file, const char *why,
                             llmr_problems *problems);

/* True when `name` is one of the specs (for listing tensors the config does not use). */
bool llmr_tensor_specs_contains(llmr_tensor_specs *s, const char *name);

#endif
