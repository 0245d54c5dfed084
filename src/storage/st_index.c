/* safetensors index parser: see st_index.h. */
#include "storage/st_index.h"

#include <stdlib.h>
#include <string.h>

#include "common/fs_util.h"
#include "common/json_util.h"

static int compare_names(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

void llmr_st_index_free(llmr_st_index *ix)
{
    for (size_t i = 0; i < ix->shard_count; i++)
        free(ix->shards[i]);
    for (size_t i = 0; i < ix->tensor_count; i++)
        free(ix->tensors[i]);
    free(ix->shards);
    free(ix->tensors);
    free(ix->tensor_shard);
    llmr_strmap_free(ix->by_name);
    memset(ix, 0, sizeof *ix);
}

static void bad_shard_name(llmr_problems *p, const char *file, const char *tensor,
                           const char *shard, const char *why)
{
    llmr_strbuf t = LLMR_STRBUF_INIT, s = LLMR_STRBUF_INIT;
    llmr_strbuf_put_display(&t, tensor, strlen(tensor) > 200 ? 200 : strlen(tensor));
    llmr_strbuf_put_display(&s, shard, strlen(shard) > 200 ? 200 : strlen(shard));
    llmr_problems_add(p, LLMR_MODEL_CORRUPT, file, "weight_map maps tensor %s to \"%s\", %s",
                      llmr_strbuf_cstr(&t), llmr_strbuf_cstr(&s), why);
    llmr_strbuf_free(&t);
    llmr_strbuf_free(&s);
}

llmr_status llmr_st_index_parse(const char *text, size_t len, const char *file,
                                llmr_st_index *out, llmr_problems *problems)
{
    memset(out, 0, sizeof *out);
    size_t before = llmr_problems_total(problems);
    llmr_strmap *shard_ids = NULL;
    llmr_strbuf err = LLMR_STRBUF_INIT;
    json_t *root = llmr_json_parse(text, len, &err);
    if (!root) {
        llmr_problems_add(problems, LLMR_MODEL_CORRUPT, file, "not valid JSON: %s",
                          llmr_strbuf_cstr(&err));
        goto done;
    }
    if (!json_is_object(root)) {
        llmr_problems_add(problems, LLMR_MODEL_CORRUPT, file, "not a JSON object");
        goto done;
    }
    const json_t *meta = json_object_get(root, "metadata");
    if (meta && !json_is_null(meta) && !json_is_object(meta)) {
        llmr_problems_add(problems, LLMR_MODEL_CORRUPT, file, "metadata is not an object");
        goto done;
    }
    const json_t *total = meta ? json_object_get(meta, "total_size") : NULL;
    if (total && !json_is_null(total)) {
        if (!llmr_json_as_u64(total, &out->total_size)) {
            llmr_problems_add(problems, LLMR_MODEL_CORRUPT, file,
                              "metadata.total_size is not a non-negative integer");
            goto done;
        }
        out->has_total_size = true;
    }
    json_t *map = json_object_get(root, "weight_map");
    if (!json_is_object(map)) {
        llmr_problems_add(problems, LLMR_MODEL_CORRUPT, file,
                          map ? "weight_map is not an object" : "no weight_map");
        goto done;
    }
    size_t n = json_object_size(map);
    if (n > LLMR_ST_INDEX_MAX_TENSORS) {
        llmr_problems_add(problems, LLMR_LIMIT_EXCEEDED, file,
                          "weight_map lists %zu tensors, more than the limit of %u", n,
                          LLMR_ST_INDEX_MAX_TENSORS);
        goto done;
    }
    out->tensors = calloc(n ? n : 1, sizeof *out->tensors);
    out->tensor_shard = calloc(n ? n : 1, sizeof *out->tensor_shard);
    out->shards = calloc(n ? n : 1, sizeof *out->shards);
    out->by_name = llmr_strmap_create(n);
    shard_ids = llmr_strmap_create(16);
    if (!out->tensors || !out->tensor_shard || !out->shards || !out->by_name || !shard_ids)
        goto oom;

    /* First pass: validate and collect the distinct shard names. */
    const char *tensor;
    json_t *value;
    json_object_foreach(map, tensor, value) {
        if (!json_is_string(value)) {
            bad_shard_name(problems, file, tensor, "(not a string)", "which is not a file name");
            continue;
        }
        const char *shard = json_string_value(value);
        if (!llmr_file_name_is_safe(shard)) {
            bad_shard_name(problems, file, tensor, shard,
                           "which is not a plain file name inside the model directory");
            continue;
        }
        if (!llmr_name_has_suffix(shard, ".safetensors")) {
            bad_shard_name(problems, file, tensor, shard, "which is not a .safetensors file");
            continue;
        }
        llmr_strmap_put_result r = llmr_strmap_put(shard_ids, shard, 0);
        if (r == LLMR_STRMAP_NOMEM)
            goto oom;
        if (r == LLMR_STRMAP_ADDED && !(out->shards[out->shard_count++] = strdup(shard)))
            goto oom;
    }
    if (llmr_problems_total(problems) != before)
        goto done;
    if (n == 0) {
        llmr_problems_add(problems, LLMR_MODEL_CORRUPT, file, "weight_map is empty");
        goto done;
    }
    qsort(out->shards, out->shard_count, sizeof *out->shards, compare_names);
    llmr_strmap_free(shard_ids);
    shard_ids = llmr_strmap_create(out->shard_count);
    if (!shard_ids)
        goto oom;
    for (size_t i = 0; i < out->shard_count; i++)
        if (llmr_strmap_put(shard_ids, out->shards[i], i) == LLMR_STRMAP_NOMEM)
            goto oom;

    /* Second pass: tensor -> shard number. */
    json_object_foreach(map, tensor, value) {
        size_t i = out->tensor_count;
        if (!(out->tensors[i] = strdup(tensor)))
            goto oom;
        llmr_strmap_get(shard_ids, json_string_value(value), &out->tensor_shard[i]);
        if (llmr_strmap_put(out->by_name, tensor, i) == LLMR_STRMAP_NOMEM) {
            free(out->tensors[i]);
            goto oom;
        }
        out->tensor_count++;
    }
    goto done;

oom:
    llmr_problems_add(problems, LLMR_OOM_RAM, file, "out of memory reading the index");
done:
    llmr_strmap_free(shard_ids);
    llmr_strbuf_free(&err);
    json_decref(root);
    llmr_status status = llmr_problems_code_since(problems, before);
    if (status != LLMR_OK)
        llmr_st_index_free(out);
    return status;
}

bool llmr_st_index_find(const llmr_st_index *ix, const char *tensor, size_t *shard)
{
    size_t i;
    if (!ix->by_name || !llmr_strmap_get(ix->by_name, tensor, &i))
        return false;
    *shard = ix->tensor_shard[i];
    return true;
}
