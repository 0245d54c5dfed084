/* Expected tensors and their check: see tensor_spec.h. */
#include "models/tensor_spec.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "common/strbuf.h"

void llmr_tensor_specs_init(llmr_tensor_specs *s)
{
    memset(s, 0, sizeof *s);
}

void llmr_tensor_specs_free(llmr_tensor_specs *s)
{
    for (size_t i = 0; i < s->count; i++)
        free(s->items[i].name);
    free(s->items);
    llmr_strmap_free(s->by_name);
    llmr_tensor_specs_init(s);
}

void llmr_tensor_specs_add(llmr_tensor_specs *s, llmr_dtype_rule rule, llmr_dtype dtype,
                           uint32_t rank, const uint64_t *shape, const char *fmt, ...)
{
    if (s->failed || rank > LLMR_SPEC_MAX_RANK) {
        s->failed = true;
        return;
    }
    if (s->count == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 64;
        llmr_tensor_spec *items = realloc(s->items, cap * sizeof *items);
        if (!items) {
            s->failed = true;
            return;
        }
        s->items = items;
        s->cap = cap;
    }
    llmr_strbuf name = LLMR_STRBUF_INIT;
    va_list ap;
    va_start(ap, fmt);
    llmr_strbuf_vprintf(&name, fmt, ap);
    va_end(ap);
    llmr_tensor_spec *t = &s->items[s->count];
    memset(t, 0, sizeof *t);
    t->name = llmr_strbuf_take(&name);
    if (!t->name) {
        s->failed = true;
        return;
    }
    t->rule = rule;
    t->dtype = dtype;
    t->rank = rank;
    memcpy(t->shape, shape, rank * sizeof *shape);
    s->count++;
}

static bool dtype_ok(const llmr_tensor_spec *spec, llmr_dtype got)
{
    if (spec->rule == LLMR_DTYPE_RULE_EXACT)
        return got == spec->dtype;
    return got == LLMR_DTYPE_F32 || got == LLMR_DTYPE_F16 || got == LLMR_DTYPE_BF16;
}

static bool shape_ok(const llmr_tensor_spec *spec, const llmr_found_tensor *got)
{
    if (got->rank != spec->rank)
        return false;
    for (uint32_t i = 0; i < spec->rank; i++)
        if (got->shape[i] != spec->shape[i])
            return false;
    return true;
}

void llmr_tensor_specs_check(const llmr_tensor_specs *s, llmr_tensor_lookup lookup, void *ctx,
                             const char *missing_file, const char *why,
                             llmr_problems *problems)
{
    llmr_strbuf a = LLMR_STRBUF_INIT, b = LLMR_STRBUF_INIT;
    for (size_t i = 0; i < s->count; i++) {
        const llmr_tensor_spec *spec = &s->items[i];
        llmr_found_tensor got;
        if (!lookup(ctx, spec->name, &got)) {
            llmr_problems_add(problems, LLMR_MODEL_CORRUPT, missing_file,
                              "tensor %s is required by %s but no shard holds it", spec->name,
                              why);
            continue;
        }
        if (!dtype_ok(spec, got.dtype)) {
            llmr_problems_add(problems, LLMR_MODEL_CORRUPT, got.file,
                              "tensor %s is %s, expected %s", spec->name,
                              llmr_dtype_name(got.dtype),
                              spec->rule == LLMR_DTYPE_RULE_EXACT ? llmr_dtype_name(spec->dtype)
                                                                  : "F32, F16 or BF16");
        }
        if (!shape_ok(spec, &got)) {
            llmr_strbuf_reset(&a);
            llmr_strbuf_reset(&b);
            llmr_shape_format(&a, got.rank, got.shape);
            llmr_shape_format(&b, spec->rank, spec->shape);
            llmr_problems_add(problems, LLMR_MODEL_CORRUPT, got.file,
                              "tensor %s has shape %s, but %s implies %s", spec->name,
                              llmr_strbuf_cstr(&a), why, llmr_strbuf_cstr(&b));
        }
    }
    llmr_strbuf_free(&a);
    llmr_strbuf_free(&b);
}

bool llmr_tensor_specs_contains(llmr_tensor_specs *s, const char *name)
{
    if (!s->by_name) {
        s->by_name = llmr_strmap_create(s->count);
        for (size_t i = 0; s->by_name && i < s->count; i++) {
            if (llmr_strmap_put(s->by_name, s->items[i].name, i) == LLMR_STRMAP_NOMEM) {
                llmr_strmap_free(s->by_name);
                s->by_name = NULL;
            }
        }
    }
    if (s->by_name)
        return llmr_strmap_get(s->by_name, name, NULL);
    for (size_t i = 0; i < s->count; i++) /* out of memory: the slow way */
        if (strcmp(s->items[i].name, name) == 0)
            return true;
    return false;
}
