/* ModelStorage entry points: format decision, the shared helpers, and cleanup.
 * The format paths live in model_safetensors.c and model_gguf.c. */
#define _XOPEN_SOURCE 700 /* realpath */
#include "storage/model_storage.h"

#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "common/fs_util.h"
#include "common/log.h"
#include "storage/model_internal.h"

bool llmr_model_format_parse(const char *text, llmr_model_format *out)
{
    if (strcmp(text, "safetensors") == 0)
        *out = LLMR_FORMAT_SAFETENSORS;
    else if (strcmp(text, "gguf") == 0)
        *out = LLMR_FORMAT_GGUF;
    else
        return false;
    return true;
}

const char *llmr_model_format_name(llmr_model_format format)
{
    switch (format) {
    case LLMR_FORMAT_SAFETENSORS:
        return "safetensors";
    case LLMR_FORMAT_GGUF:
        return "gguf";
    default:
        return "auto";
    }
}

void llmr_model_options_default(llmr_model_options *o)
{
    memset(o, 0, sizeof *o);
    o->format = LLMR_FORMAT_AUTO;
}

bool llmr_model_add_file(llmr_model *m, const char *name, uint64_t size, const char *role)
{
    llmr_model_file *files = realloc(m->files, (m->file_count + 1) * sizeof *files);
    if (!files)
        return false;
    m->files = files;
    char *copy = strdup(name);
    if (!copy)
        return false;
    files[m->file_count++] = (llmr_model_file){copy, size, role};
    m->total_bytes += size;
    return true;
}

const llmr_dir_entry *llmr_model_need_file(const llmr_dir_listing *l, const char *name,
                                           llmr_status if_missing, const char *why_needed,
                                           llmr_problems *p)
{
    const llmr_dir_entry *e = llmr_dir_find(l, name);
    if (!e) {
        llmr_problems_add(p, if_missing, name, "missing (%s)", why_needed);
        return NULL;
    }
    if (e->kind == LLMR_DIR_BROKEN_LINK) {
        llmr_problems_add(p, if_missing, name,
                          "a symbolic link whose target does not exist (an interrupted "
                          "download?); needed because %s",
                          why_needed);
        return NULL;
    }
    if (e->kind != LLMR_DIR_FILE) {
        llmr_problems_add(p, LLMR_INVALID_ARGUMENT, name, "not a regular file; needed because %s", why_needed);
        return NULL;
    }
    return e;
}

void llmr_model_bad_name(const char *name, llmr_problems *p)
{
    llmr_strbuf sb = LLMR_STRBUF_INIT;
    llmr_strbuf_put_display(&sb, name, strlen(name));
    llmr_problems_add(p, LLMR_INVALID_ARGUMENT, NULL,
                      "file name \"%s\" is not valid UTF-8 or holds control characters; rename it",
                      llmr_strbuf_cstr(&sb));
    llmr_strbuf_free(&sb);
}

void llmr_json_append_text(json_t *array, const char *fmt, ...)
{
    llmr_strbuf sb = LLMR_STRBUF_INIT;
    va_list ap;
    va_start(ap, fmt);
    llmr_strbuf_vprintf(&sb, fmt, ap);
    va_end(ap);
    json_t *s = json_stringn(llmr_strbuf_cstr(&sb), sb.len);
    if (s)
        json_array_append_new(array, s);
    llmr_strbuf_free(&sb);
}

/* Counts top-level weight files of each format, usable or not. */
static void count_formats(const llmr_dir_listing *l, size_t *safetensors, size_t *gguf)
{
    *safetensors = *gguf = 0;
    for (size_t i = 0; i < l->count; i++) {
        if (l->entries[i].kind == LLMR_DIR_OTHER)
            continue;
        if (llmr_name_has_suffix(l->entries[i].name, ".safetensors"))
            (*safetensors)++;
        else if (llmr_name_has_suffix(l->entries[i].name, ".gguf"))
            (*gguf)++;
    }
}

/* Appends the top-level weight files ending in `suffix` to sb, escaped for display:
 * the first three, then how many more. */
static void put_weight_names(llmr_strbuf *sb, const llmr_dir_listing *l, const char *suffix)
{
    size_t shown = 0, total = 0;
    for (size_t i = 0; i < l->count; i++) {
        const char *name = l->entries[i].name;
        if (l->entries[i].kind == LLMR_DIR_OTHER || !llmr_name_has_suffix(name, suffix))
            continue;
        if (total++ >= 3)
            continue;
        llmr_strbuf_puts(sb, shown++ ? ", " : "");
        llmr_strbuf_put_display(sb, name, strlen(name));
    }
    if (total > shown)
        llmr_strbuf_printf(sb, " and %zu more", total - shown);
}

/* Settles the format, or adds a problem and returns AUTO. */
static llmr_model_format decide_format(const llmr_dir_listing *l, llmr_model_format stated,
                                       llmr_problems *p)
{
    size_t n_st, n_gguf;
    count_formats(l, &n_st, &n_gguf);
    if (stated == LLMR_FORMAT_SAFETENSORS && n_st == 0) {
        llmr_problems_add(p, LLMR_NOT_FOUND, NULL,
                          "no .safetensors file, but the model was registered as format "
                          "safetensors%s",
                          n_gguf ? " (the directory holds .gguf files: register it as format gguf)"
                                 : "");
        return LLMR_FORMAT_AUTO;
    }
    if (stated == LLMR_FORMAT_GGUF && n_gguf == 0) {
        llmr_problems_add(p, LLMR_NOT_FOUND, NULL,
                          "no .gguf file, but the model was registered as format gguf%s",
                          n_st ? " (the directory holds .safetensors files: register it as "
                                 "format safetensors)"
                               : "");
        return LLMR_FORMAT_AUTO;
    }
    if (stated != LLMR_FORMAT_AUTO)
        return stated;
    if (n_st && n_gguf) {
        llmr_strbuf names = LLMR_STRBUF_INIT;
        llmr_strbuf_printf(&names, "the directory holds both .safetensors (%zu: ", n_st);
        put_weight_names(&names, l, ".safetensors");
        llmr_strbuf_printf(&names, ") and .gguf (%zu: ", n_gguf);
        put_weight_names(&names, l, ".gguf");
        llmr_problems_add(p, LLMR_INVALID_ARGUMENT, NULL,
                          "%s) files; state the format (--format safetensors or --format gguf)",
                          llmr_strbuf_cstr(&names));
        llmr_strbuf_free(&names);
        return LLMR_FORMAT_AUTO;
    }
    if (n_st)
        return LLMR_FORMAT_SAFETENSORS;
    if (n_gguf)
        return LLMR_FORMAT_GGUF;
    llmr_problems_add(p, LLMR_NOT_FOUND, NULL,
                      "no model weights: the directory holds no .safetensors or .gguf file");
    return LLMR_FORMAT_AUTO;
}

llmr_status llmr_model_open(const char *dir, const llmr_model_options *options, llmr_model **out,
                            llmr_problems *problems)
{
    *out = NULL;
    llmr_model_options defaults;
    if (!options) {
        llmr_model_options_default(&defaults);
        options = &defaults;
    }
    size_t before = llmr_problems_total(problems);
    llmr_dir_listing listing;
    llmr_status status = llmr_dir_list(dir, &listing, problems);
    if (status != LLMR_OK)
        return status;

    llmr_model *m = calloc(1, sizeof *m);
    char *absolute = realpath(dir, NULL); /* the descriptor names the directory absolutely */
    if (m)
        m->dir = absolute ? absolute : strdup(dir);
    else
        free(absolute);
    if (!m || !m->dir || !(m->notes = json_array()) ||
        !(m->warnings = json_array())) {
        llmr_problems_add(problems, LLMR_OOM_RAM, NULL, "out of memory opening %s", dir);
        goto fail;
    }
    m->format = decide_format(&listing, options->format, problems);
    if (m->format == LLMR_FORMAT_SAFETENSORS)
        llmr_model_open_safetensors(m, &listing, options, problems);
    else if (m->format == LLMR_FORMAT_GGUF)
        llmr_model_open_gguf(m, &listing, options, problems);
    if (llmr_problems_total(problems) != before)
        goto fail;
    llmr_dir_listing_free(&listing);
    llmr_log_debug("storage", "%s: %s, runtime %s, %zu files, %llu bytes, %zu tensors", m->dir,
                   llmr_model_format_name(m->format),
                   m->runtime ? llmr_runtime_name(m->runtime) : "none", m->file_count,
                   (unsigned long long)m->total_bytes, m->tensor_count);
    *out = m;
    return LLMR_OK;

fail:
    llmr_dir_listing_free(&listing);
    llmr_model_close(m);
    llmr_log_debug("storage", "%s: %zu problems", dir, llmr_problems_total(problems) - before);
    return llmr_problems_code_since(problems, before);
}

void llmr_model_close(llmr_model *m)
{
    if (!m)
        return;
    for (size_t i = 0; i < m->file_count; i++)
        free(m->files[i].name);
    free(m->files);
    for (size_t i = 0; i < m->shard_count; i++)
        llmr_st_file_close(&m->shards[i]);
    free(m->shards);
    for (size_t i = 0; i < m->gguf_count; i++)
        llmr_gguf_file_close(&m->gguf[i]);
    free(m->gguf);
    free(m->tensors);
    llmr_strmap_free(m->tensor_by_name);
    json_decref(m->config);
    json_decref(m->engine_config);
    json_decref(m->notes);
    json_decref(m->warnings);
    free(m->dir);
    free(m->unsupported_reason);
    free(m->model_type);
    free(m->architecture);
    free(m->primary_file);
    free(m);
}

const llmr_model_tensor *llmr_model_tensor_find(const llmr_model *m, const char *name)
{
    size_t i;
    if (!m->tensor_by_name || !llmr_strmap_get(m->tensor_by_name, name, &i))
        return NULL;
    return &m->tensors[i];
}

const uint8_t *llmr_model_tensor_data(const llmr_model *m, const llmr_model_tensor *t)
{
    return llmr_st_file_tensor_data(&m->shards[t->shard], t->info);
}
