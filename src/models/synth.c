/* Synthetic snapshot writer: see synth.h. */
#define _GNU_SOURCE
#include "models/synth.h"

#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/fs_util.h"
#include "common/json_util.h"
#include "models/gpt_oss_config.h"
#include "models/gpt_oss_preset.h"
#include "storage/st_index.h"
#include "storage/st_writer.h"

/* Tokenizer-side files copied when present in tokenizer_from. */
static const char *const tokenizer_files[] = {"tokenizer.json", "tokenizer_config.json",
                                              "special_tokens_map.json", "chat_template.jinja"};

static bool dir_is_empty_or_absent(const char *path)
{
    DIR *d = opendir(path);
    if (!d)
        return errno == ENOENT;
    struct dirent *de;
    bool empty = true;
    while (empty && (de = readdir(d)))
        empty = strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0;
    closedir(d);
    return empty;
}

static llmr_status write_json(const char *dir, const char *name, const json_t *value,
                              llmr_strbuf *err)
{
    char *path = llmr_path_join(dir, name);
    char *text = json_dumps(value, JSON_INDENT(2));
    llmr_status st = LLMR_OOM_RAM;
    if (path && text) {
        size_t n = strlen(text);
        text[n] = '\n'; /* replaces the NUL: written with its length */
        st = llmr_write_file_atomic(path, text, n + 1, err);
    }
    free(path);
    free(text);
    return st;
}

static llmr_status copy_file(const char *from_dir, const char *to_dir, const char *name,
                             llmr_strbuf *err)
{
    char *src = llmr_path_join(from_dir, name), *dst = llmr_path_join(to_dir, name);
    char *data = NULL;
    size_t len;
    llmr_strbuf why = LLMR_STRBUF_INIT;
    llmr_status st = src && dst ? llmr_read_file(src, 1u << 30, &data, &len, &why) : LLMR_OOM_RAM;
    if (st == LLMR_OK)
        st = llmr_write_file_atomic(dst, data, len, &why);
    if (st != LLMR_OK)
        llmr_strbuf_printf(err, "copying %s: %s", src ? src : name, llmr_strbuf_cstr(&why));
    llmr_strbuf_free(&why);
    free(src);
    free(dst);
    free(data);
    return st;
}

static void shard_name(char *buf, size_t size, size_t i, size_t n)
{
    snprintf(buf, size, "model-%05zu-of-%05zu.safetensors", i + 1, n);
}

/* Assigns tensors to shards in order, starting a new one past max_bytes. */
static size_t assign_shards(const llmr_st_write_tensor *t, size_t n, uint64_t max_bytes,
                            size_t *shard_of)
{
    size_t shard = 0;
    uint64_t used = 0;
    for (size_t i = 0; i < n; i++) {
        uint64_t bytes = 0;
        llmr_st_tensor_bytes(&t[i], &bytes);
        if (used > 0 && used + bytes > max_bytes) {
            shard++;
            used = 0;
        }
        shard_of[i] = shard;
        used += bytes;
    }
    return n ? shard + 1 : 0;
}

static llmr_status write_shards(const llmr_synth_options *o, const llmr_st_write_tensor *t,
                                size_t n, llmr_strbuf *err)
{
    llmr_status st = LLMR_OOM_RAM;
    size_t *shard_of = calloc(n ? n : 1, sizeof *shard_of);
    json_t *map = json_object(), *index = NULL;
    json_t *meta = json_pack("{s:s}", "format", "pt");
    if (!shard_of || !map || !meta)
        goto done;
    uint64_t max = o->max_shard_bytes ? o->max_shard_bytes : LLMR_SYNTH_DEFAULT_SHARD_BYTES;
    size_t shards = assign_shards(t, n, max, shard_of);
    uint64_t total = 0;
    char name[64];
    for (size_t s = 0, first = 0; s < shards; s++) {
        size_t count = 0;
        uint64_t bytes = 0;
        while (first + count < n && shard_of[first + count] == s) {
            uint64_t b = 0;
            llmr_st_tensor_bytes(&t[first + count], &b);
            bytes += b;
            count++;
        }
        shard_name(name, sizeof name, s, shards);
        for (size_t i = first; i < first + count; i++)
            json_object_set_new(map, t[i].name, json_string(name));
        if (o->progress)
            fprintf(o->progress, "writing %s: %zu tensors, %.2f GB\n", name, count, bytes / 1e9);
        char *path = llmr_path_join(o->out_dir, name);
        st = path ? llmr_st_write_file(path, t + first, count, meta, NULL, NULL, err) : LLMR_OOM_RAM;
        free(path);
        if (st != LLMR_OK)
            goto done;
        total += bytes;
        first += count;
    }
    index = json_pack("{s:{s:I}, s:O}", "metadata", "total_size", (json_int_t)total, "weight_map", map);
    st = index ? write_json(o->out_dir, LLMR_ST_INDEX_FILE, index, err) : LLMR_OOM_RAM;
done:
    if (st == LLMR_OOM_RAM && err->len == 0)
        llmr_strbuf_puts(err, "out of memory");
    free(shard_of);
    json_decref(map);
    json_decref(meta);
    json_decref(index);
    return st;
}

llmr_status llmr_synth_snapshot(const llmr_synth_options *o, llmr_strbuf *err)
{
    json_t *config = llmr_gpt_oss_preset_config(o->preset);
    if (!config) {
        llmr_strbuf_printf(err, "unknown preset \"%s\"; presets:", o->preset);
        for (const char *const *p = llmr_gpt_oss_preset_names; *p; p++)
            llmr_strbuf_printf(err, " %s", *p);
        return LLMR_INVALID_ARGUMENT;
    }
    llmr_status st;
    json_t *generation = NULL;
    llmr_st_write_tensor *tensors = NULL;
    llmr_tensor_specs specs;
    llmr_tensor_specs_init(&specs);
    if (!dir_is_empty_or_absent(o->out_dir)) {
        llmr_strbuf_printf(err, "%s exists and is not empty; choose a new directory", o->out_dir);
        st = LLMR_INVALID_ARGUMENT;
        goto done;
    }
    if ((st = llmr_mkdir_p(o->out_dir, err)) != LLMR_OK)
        goto done;

    llmr_gpt_oss_config cfg;
    llmr_strbuf unsupported = LLMR_STRBUF_INIT;
    llmr_problems problems;
    llmr_problems_init(&problems);
    st = llmr_gpt_oss_config_parse(config, "config.json", &cfg, &unsupported, &problems);
    if (st != LLMR_OK)
        llmr_strbuf_printf(err, "preset %s does not parse: %s%s", o->preset,
                           llmr_strbuf_cstr(&unsupported),
                           problems.count ? problems.items[0].message : "");
    llmr_strbuf_free(&unsupported);
    llmr_problems_free(&problems);
    if (st != LLMR_OK) {
        st = LLMR_INTERNAL;
        goto done;
    }
    llmr_gpt_oss_expected_tensors(&cfg, &specs);
    tensors = calloc(specs.count ? specs.count : 1, sizeof *tensors);
    if (specs.failed || !tensors) {
        llmr_strbuf_puts(err, "out of memory");
        st = LLMR_OOM_RAM;
        goto done;
    }
    for (size_t i = 0; i < specs.count; i++) {
        tensors[i].name = specs.items[i].name;
        tensors[i].dtype = specs.items[i].dtype;
        tensors[i].rank = specs.items[i].rank;
        memcpy(tensors[i].shape, specs.items[i].shape, sizeof specs.items[i].shape);
    }
    generation = llmr_gpt_oss_generation_config();
    if ((st = write_json(o->out_dir, "config.json", config, err)) != LLMR_OK ||
        (st = write_json(o->out_dir, "generation_config.json", generation, err)) != LLMR_OK ||
        (st = write_shards(o, tensors, specs.count, err)) != LLMR_OK)
        goto done;
    for (size_t i = 0; o->tokenizer_from && i < sizeof tokenizer_files / sizeof *tokenizer_files; i++) {
        char *src = llmr_path_join(o->tokenizer_from, tokenizer_files[i]);
        struct stat sb;
        bool present = src && stat(src, &sb) == 0;
        free(src);
        if (present && (st = copy_file(o->tokenizer_from, o->out_dir, tokenizer_files[i], err)) != LLMR_OK)
            goto done;
    }
done:
    free(tensors);
    llmr_tensor_specs_free(&specs);
    json_decref(config);
    json_decref(generation);
    return st;
}
